// view_of_pointer: the device of raw memory from the driver, never from the caller's word alone.
#include "stridex/cuda/from_pointer.hpp"

#include <string>

#include "stridex/address.hpp"
#include "stridex/cuda/pointer.hpp"

namespace stridex::cuda {
namespace {

std::string describe(const PointerInfo& info) {
    switch (info.memory_type) {
        case MemoryType::device: return "device memory of " + info.device().name();
        case MemoryType::pinned_host: return "pinned host memory (cuda_host)";
        case MemoryType::managed: return "managed memory (cuda_managed)";
        case MemoryType::host: break;
    }
    return "host memory unknown to CUDA (cpu)";
}

void check_range(std::uint64_t address, Span span, const PointerInfo& info) {
    if (info.base == 0 || info.size == 0 || span.hi <= span.lo) return;  // unknown range, or no bytes
    std::uint64_t lo = 0, hi = 0, end = 0;
    const bool representable = offset_address(address, span.lo, &lo) && offset_address(address, span.hi, &hi) &&
                               offset_address(info.base, info.size, /*negative=*/false, &end);
    if (!representable || lo < info.base || hi > end)
        fail(ErrorKind::value, "the view reaches bytes [", hex(lo), ", ", hex(hi), ") around ", hex(address),
             ", outside the allocation that holds it, [", hex(info.base), ", ", hex(info.base + info.size), ") (",
             describe(info), ")");
}

Span span_of(const Layout& layout, Dtype dtype) {
    // Packed sub-byte data is C-contiguous (View checks it): its bytes are the packed storage.
    if (dtype.is_subbyte()) return layout.empty() ? Span{} : Span{0, dtype.storage_bytes(layout.size())};
    return layout.byte_span(dtype.itemsize());
}

}  // namespace

Device resolve_device(const void* ptr, Span span, std::optional<Device> claimed) {
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    if (address == 0 && span.hi <= span.lo) return claimed.value_or(Device::cpu());  // no memory at all

    Driver& d = driver();
    if (!d.usable() || d.device_count() == 0) {
        if (!claimed) return Device::cpu();
        if (claimed->is_cuda_family())
            fail(ErrorKind::value, "device ", claimed->name(), " was given for pointer ", hex(address),
                 ", but no CUDA GPU is usable here (",
                 d.usable() ? std::string("the driver sees no device") : d.unavailable_reason(),
                 "), so no memory can be CUDA memory: the pointer is host memory (cpu)");
        return *claimed;
    }

    const PointerInfo info = pointer_info(address);
    const Device actual = info.device();
    if (claimed && *claimed != actual) {
        // CUDA cannot judge memory of another runtime (ROCm, Metal, ...): such a claim stands.
        const bool foreign = info.memory_type == MemoryType::host && !claimed->is_cuda_family() &&
                             claimed->type != DeviceType::kCPU;
        if (!foreign)
            fail(ErrorKind::value, "device ", claimed->name(), " was given for pointer ", hex(address),
                 ", but the CUDA driver says it is ", describe(info), " (device ", actual.name(), ")");
        return *claimed;
    }
    if (info.memory_type != MemoryType::host) check_range(address, span, info);
    return actual;
}

View view_of_pointer(void* ptr, Layout layout, Dtype dtype, std::optional<Device> device, Owner owner, bool readonly) {
    dtype.validate();
    const Device actual = resolve_device(ptr, span_of(layout, dtype), device);
    return View(ptr, 0, std::move(layout), dtype, actual, readonly, std::move(owner));
}

}  // namespace stridex::cuda
