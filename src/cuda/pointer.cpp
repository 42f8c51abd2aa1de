// pointer_info (one cuPointerGetAttributes call) and DevicePtr's out-of-line parts.
#include "stridex/cuda/pointer.hpp"

#include <cstring>

namespace stridex::cuda {

std::string_view to_string(MemoryType type) noexcept {
    switch (type) {
        case MemoryType::host: return "host";
        case MemoryType::pinned_host: return "pinned_host";
        case MemoryType::device: return "device";
        case MemoryType::managed: return "managed";
    }
    return "unknown";
}

Device device_for(MemoryType type, int ordinal) noexcept {
    switch (type) {
        case MemoryType::device: return Device::cuda(ordinal);
        case MemoryType::pinned_host: return Device::cuda_host();
        case MemoryType::managed: return Device::cuda_managed();
        case MemoryType::host: break;
    }
    return Device::cpu();
}

namespace {

// Attribute slots are 8 zeroed bytes each, whatever the attribute's width: the driver writes a
// 4-byte unsigned (memory type), a 4-byte int (ordinal), an 8-byte address or size, and a boolean
// whose width the documentation does not state. A wide zeroed slot makes every case safe to read.
struct AttributeQuery {
    static constexpr unsigned kCount = 5;
    int attributes[kCount] = {cu::kPointerAttrMemoryType, cu::kPointerAttrIsManaged, cu::kPointerAttrDeviceOrdinal,
                              cu::kPointerAttrRangeStartAddr, cu::kPointerAttrRangeSize};
    std::uint64_t slots[kCount] = {};

    CUresult run(const Driver& d, std::uintptr_t ptr) {
        void* data[kCount];
        for (unsigned i = 0; i < kCount; ++i) {
            slots[i] = 0;
            data[i] = &slots[i];
        }
        return d.api().pointer_get_attributes(kCount, attributes, data, ptr);
    }
    // Little-endian: the low bytes of a slot hold whatever narrower value the driver wrote.
    std::uint32_t u32(unsigned i) const { return static_cast<std::uint32_t>(slots[i]); }
};

}  // namespace

std::optional<bool> is_managed_memory(std::uintptr_t ptr) noexcept {
    Driver* loaded = nullptr;
    try {
        loaded = &driver();
    } catch (...) {  // only allocation failure can get here (see device_count)
        return std::nullopt;
    }
    Driver& d = *loaded;
    if (!d.usable() || d.device_count() == 0 || d.api().pointer_get_attributes == nullptr) return std::nullopt;
    int attribute = cu::kPointerAttrIsManaged;
    std::uint64_t slot = 0;  // wide and zeroed, as in AttributeQuery
    void* data = &slot;
    if (d.api().pointer_get_attributes(1, &attribute, &data, ptr) != result::success) return std::nullopt;
    return slot != 0;
}

PointerInfo pointer_info(std::uintptr_t ptr) {
    Driver& d = driver();
    if (!d.usable() || d.device_count() == 0) return {};
    d.require("cuPointerGetAttributes", d.api().pointer_get_attributes);

    AttributeQuery q;
    CUresult r = q.run(d, ptr);
    if (r == result::invalid_context) {
        // No context current on this thread. Asked first without one on purpose: making device
        // 0's primary context current would create it (hundreds of MB) for a mere question.
        const ContextGuard guard(d, 0);
        r = q.run(d, ptr);
    }
    // A child forked after its parent initialised CUDA inherits the parent's driver state, and the
    // driver refuses every call there (CUDA_ERROR_NOT_INITIALIZED). No CUDA memory is usable in
    // such a process, so whatever the pointer is, it is host memory here (torch's DataLoader
    // forks its workers, which hand plain host arrays around).
    if (r == result::not_initialized || r == result::deinitialized) return {};
    if (r != result::success) d.fail_call("cuPointerGetAttributes", r);

    PointerInfo info;
    const std::uint32_t type = q.u32(0);
    const bool managed = q.slots[1] != 0;
    if (managed || type == cu::kMemoryTypeUnified)
        info.memory_type = MemoryType::managed;
    else if (type == cu::kMemoryTypeDevice)
        info.memory_type = MemoryType::device;
    else if (type == cu::kMemoryTypeHost)
        info.memory_type = MemoryType::pinned_host;
    else
        return {};  // unknown to CUDA: the attributes hold the driver's "NULL" defaults
    info.device_ordinal = static_cast<int>(q.u32(2));
    info.base = q.slots[3];
    info.size = q.slots[4];
    info.host_accessible = info.memory_type != MemoryType::device;
    return info;
}

// ---- DevicePtr ----------------------------------------------------------------------------------

namespace detail {

void fail_pointer_range(std::uint64_t address, const char* op, std::string_view operand) {
    fail(ErrorKind::value, "pointer arithmetic leaves the 64-bit address space: ", hex(address), ' ', op, ' ', operand);
}

void fail_pointer_devices(Device a, Device b, const char* op) {
    fail(ErrorKind::value, "cannot ", op, " pointers of different devices (", a.name(), " and ", b.name(), ")");
}

void fail_alignment(std::uint64_t alignment) {
    fail(ErrorKind::value, "alignment must be a positive number of bytes, found ", alignment);
}

void fail_element_misaligned(std::int64_t bytes, std::size_t element_size) {
    fail(ErrorKind::value, "byte offset ", bytes, " is not a multiple of the element size ", element_size);
}

}  // namespace detail

std::int64_t operator-(DevicePtr a, DevicePtr b) {
    if (a.device() != b.device()) detail::fail_pointer_devices(a.device(), b.device(), "subtract");
    std::int64_t out = 0;
    if (__builtin_sub_overflow(a.address(), b.address(), &out))
        detail::fail_pointer_range(a.address(), "-", b.to_string());
    return out;
}

std::strong_ordering operator<=>(DevicePtr a, DevicePtr b) {
    if (a.device() != b.device()) detail::fail_pointer_devices(a.device(), b.device(), "order");
    return a.address() <=> b.address();
}

DevicePtr DevicePtr::align_up(std::uint64_t alignment) const {
    if (alignment == 0) detail::fail_alignment(alignment);
    const std::uint64_t rem = address_ % alignment;
    return rem == 0 ? *this : *this + (alignment - rem);  // the + checks for overflow
}

DevicePtr DevicePtr::align_down(std::uint64_t alignment) const {
    if (alignment == 0) detail::fail_alignment(alignment);
    return {address_ - address_ % alignment, device_};
}

bool DevicePtr::is_aligned(std::uint64_t alignment) const {
    if (alignment == 0) detail::fail_alignment(alignment);
    return address_ % alignment == 0;
}

std::string DevicePtr::to_string() const { return hex(address_) + " (" + device_.name() + ")"; }

}  // namespace stridex::cuda
