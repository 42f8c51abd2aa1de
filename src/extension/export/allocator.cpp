// allocator= / like= and the process default allocator (allocator.hpp), and the pools'
// introspection: stridex.memory_stats and stridex.empty_cache (docs/memory.md).
#include "export/allocator.hpp"

#include <nanobind/stl/string.h>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "export/py_owner.hpp"
#include "stridex/cuda/driver.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

// The process default: a resolved Python allocator object, or None for stridex's pools. Read and
// written with the GIL held; never destroyed (releases at exit may still look at it).
nb::object& default_object() {
    static auto* object = new nb::object(nb::none());
    return *object;
}

nb::dict stats_dict(const std::string& device, const cuda::PoolStats& s) {
    nb::dict d;
    d["device"] = device;
    d["in_use"] = s.in_use;
    d["peak_in_use"] = s.peak_in_use;
    d["reserved"] = s.reserved;
    d["peak_reserved"] = s.peak_reserved;
    d["allocations"] = s.allocations;
    d["created"] = s.created;
    d["shareable"] = s.shareable;
    d["not_shareable"] = s.not_shareable.empty() ? nb::none() : nb::cast(s.not_shareable);
    d["registered"] = s.registered;
    return d;
}

}  // namespace

Allocation PyAllocator::allocate(std::size_t bytes, Device device, std::intptr_t stream) const {
    const nb::gil_scoped_acquire gil;
    const nb::object result = object_.attr("allocate")(bytes, device.name(), stream);
    if (!nb::isinstance<nb::tuple>(result) || nb::len(result) != 2)
        fail(ErrorKind::type, "allocator ", nb::repr(object_).c_str(),
             ": allocate() must return (address, keepalive), found ", nb::repr(result).c_str());
    const nb::tuple pair = nb::borrow<nb::tuple>(result);
    const auto address = nb::cast<std::uintptr_t>(pair[0]);
    if (address == 0)
        fail(ErrorKind::memory, "allocator ", nb::repr(object_).c_str(), " returned a NULL address for ", bytes,
             " bytes on ", device.name());
    return {reinterpret_cast<void*>(address), owner_of(pair[1])};
}

const Allocator* choose_allocator(nb::handle allocator, nb::handle like, std::optional<PyAllocator>& holder) {
    nb::object chosen;
    if (allocator.is_none() && like.is_none()) {
        chosen = default_object();
    } else {
        chosen = nb::module_::import_("stridex._memory").attr("_choose")(allocator, like);
    }
    if (chosen.is_none()) return nullptr;
    holder.emplace(std::move(chosen));
    return &*holder;
}

void bind_memory(nb::module_& m) {
    m.def(
        "_set_default_allocator", [](nb::object allocator) { default_object() = std::move(allocator); },
        nb::arg("allocator").none(), "Private: stridex.set_allocator's store (a resolved allocator, None: pools).");
    m.def(
        "_get_default_allocator", []() { return default_object(); }, "Private: the stored default allocator.");
    m.def(
        "memory_stats",
        [](nb::handle device) {
            const Device d = device_arg(device.ptr(), "memory_stats(): device", /*ints_are_cuda_ordinals=*/true);
            if (d.type == DeviceType::kCUDAHost) return stats_dict(d.name(), cuda::pinned_pool_stats());
            if (d == Device::cpu()) return stats_dict(d.name(), cuda::pageable_pool_stats());
            if (d.type != DeviceType::kCUDA)
                fail(ErrorKind::value, "memory_stats(): stridex pools memory of cpu, cuda:N and cuda_host, not ",
                     d.name());
            return stats_dict(d.name(), cuda::device_pool_stats(d.id));
        },
        nb::arg("device") = 0,
        nb::sig("def memory_stats(device: stridex.typing.DeviceLike | int = 0) -> stridex.typing.MemoryStats"),
        "Bytes of stridex's pool of `device` (cuda:N, cuda_host for the pinned pool, cpu for large pageable results): "
        "in_use and peak_in_use "
        "(handed out by stridex), reserved and peak_reserved (held from the driver), allocations (live), created, "
        "shareable (pool memory crosses processes), not_shareable (why not) and registered (cpu: bytes of the pool's "
        "blocks page-locked for the DMA engine).");
    m.def(
        "empty_cache",
        [](nb::handle device) {
            if (device.is_none()) {
                for (int i = 0; i < cuda::device_count(); ++i) cuda::trim_device_pool(i);
                cuda::trim_host_pools();
                return;
            }
            const Device d = device_arg(device.ptr(), "empty_cache(): device", /*ints_are_cuda_ordinals=*/true);
            if (d.type == DeviceType::kCUDAHost || d == Device::cpu())
                cuda::trim_host_pools();
            else if (d.type == DeviceType::kCUDA)
                cuda::trim_device_pool(d.id);
            else
                fail(ErrorKind::value, "empty_cache(): stridex pools memory of cpu, cuda:N and cuda_host, not ",
                     d.name());
        },
        nb::arg("device") = nb::none(),
        nb::sig("def empty_cache(device: stridex.typing.DeviceLike | int | None = None) -> None"),
        "Returns the memory stridex's pools cache (freed, unused) to the driver: of `device` (cuda:N; cuda_host or "
        "cpu: the host pools), "
        "or of every pool (None). Memory still in use, or whose last use has not completed, stays.");
}

}  // namespace stridex::python
