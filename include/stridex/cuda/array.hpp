// stridex::Array: a View that owns its memory, for functions that return new arrays.
//
//     stridex::Array out = stridex::Array::cuda({n}, stridex::dtypes::float32, x.device().id);
//     launch(out.as<float, 1>(), ...);
//     return out;                      // arrives in Python as a stridex.View on cuda:N
//
// An Array is a View (pass it anywhere a View goes) whose owner frees the memory exactly once when
// the last View of it goes, on whichever thread that is. Every factory returns a C-contiguous,
// writable array with uninitialised contents, and the Array's device is the memory's own: the
// factories that allocate know it, and adopt() asks the CUDA driver (cuda::view_of_pointer), so a
// device pointer can never leave tagged as host memory or the other way round.
// Pinned and device memory come from the CUDA driver loaded at run time (include/stridex/cuda/);
// without one they are Error(cuda) saying why.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>

#include "stridex/view.hpp"

namespace stridex {

class Allocator;  // stridex/cuda/memory.hpp

class Array : public View {
public:
    Array() = default;  // an empty placeholder (a 0-d View of nothing)

    // 64-byte-aligned host memory (Device::cpu()).
    static Array host(std::span<const std::int64_t> shape, Dtype dtype);
    // Page-locked host memory (stridex's pinned pool, Device::cuda_host()): host-addressable, and
    // copied to and from GPUs by DMA.
    static Array pinned(std::span<const std::int64_t> shape, Dtype dtype);
    // Device memory of GPU `ordinal` (Device::cuda(ordinal)) from its stream-ordered pool,
    // allocated on `stream` (the stream that will write it; the encoded value of view.hpp) and
    // freed on it when the last View goes (docs/memory.md).
    static Array cuda(std::span<const std::int64_t> shape, Dtype dtype, int ordinal,
                      std::intptr_t stream = kDefaultStream);
    // The same from the caller's allocator (memory.hpp), for any device it allocates on.
    static Array allocate(std::span<const std::int64_t> shape, Dtype dtype, Device device, const Allocator& allocator,
                          std::intptr_t stream = kDefaultStream);

    static Array host(std::initializer_list<std::int64_t> shape, Dtype dtype) { return host(span(shape), dtype); }
    static Array pinned(std::initializer_list<std::int64_t> shape, Dtype dtype) { return pinned(span(shape), dtype); }
    static Array cuda(std::initializer_list<std::int64_t> shape, Dtype dtype, int ordinal,
                      std::intptr_t stream = kDefaultStream) {
        return cuda(span(shape), dtype, ordinal, stream);
    }

    // Memory allocated elsewhere, freed by `deleter(context)` exactly once (also when adopt itself
    // fails). The device is found from the pointer, `device` is only a check (see
    // cuda::view_of_pointer).
    static Array adopt(void* data, Layout layout, Dtype dtype, void (*deleter)(void*) noexcept, void* context,
                       std::optional<Device> device = std::nullopt);

private:
    explicit Array(View view) : View(std::move(view)) {}
    static std::span<const std::int64_t> span(std::initializer_list<std::int64_t> shape) noexcept {
        return {shape.begin(), shape.size()};
    }
};

}  // namespace stridex
