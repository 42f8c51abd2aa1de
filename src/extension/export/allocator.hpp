// The caller's allocator from Python (docs/memory.md): allocator= and like= of the allocating
// calls, and the process default (stridex.set_allocator / using_allocator).
#pragma once

#include <nanobind/nanobind.h>

#include <optional>

#include "stridex/cuda/memory.hpp"

namespace stridex::python {

// A Python allocator object as a stridex::Allocator. Protocol: obj.allocate(nbytes, device,
// stream) -> (address: int, keepalive: object); the memory stays valid while `keepalive` lives and
// returns to the allocator when it goes. Called with the GIL taken (the copy engine runs without).
class PyAllocator final : public Allocator {
public:
    explicit PyAllocator(nanobind::object object) : object_(std::move(object)) {}
    Allocation allocate(std::size_t bytes, Device device, std::intptr_t stream) const override;

private:
    nanobind::object object_;
};

// The allocator of one call, with the GIL held: `allocator` (None, 'stridex', 'torch', 'cupy',
// 'rmm' or an object), else `like`'s framework, else the process default. nullptr means stridex's
// pools (the default, no Python on the hot path). `holder` keeps a Python allocator for the call.
const Allocator* choose_allocator(nanobind::handle allocator, nanobind::handle like,
                                  std::optional<PyAllocator>& holder);

}  // namespace stridex::python
