// Device pointers: what the driver knows about an address (pointer_info), and DevicePtr, an
// address plus the device it belongs to, with checked arithmetic.
//
// DevicePtr exists because cuda.bindings' CUdeviceptr cannot be offset (`p + 16` is a TypeError,
// docs/protocols.md, "CUDA pointers") nor compared with an int; stridex pointers do both, and
// convert to an int anywhere.
#pragma once

#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "stridex/address.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/device.hpp"
#include "stridex/error.hpp"

namespace stridex::cuda {

// ---- Pointer attributes -----------------------------------------------------------------------

enum class MemoryType : std::uint8_t {
    host,         // not known to CUDA (malloc, NumPy, a stack address)
    pinned_host,  // page-locked host memory: cuMemAllocHost, cuMemHostRegister, torch pin_memory()
    device,       // device memory: cuMemAlloc, cudaMallocAsync, cuMemCreate + cuMemMap
    managed,      // unified memory: cuMemAllocManaged
};
std::string_view to_string(MemoryType type) noexcept;

// The stridex Device of memory of a given type: kCUDA:ordinal for device memory, kCUDAHost:0 for
// pinned, kCUDAManaged:0 for managed (DLPack gives both id 0) and kCPU for plain host memory.
Device device_for(MemoryType type, int ordinal) noexcept;

struct PointerInfo {
    MemoryType memory_type = MemoryType::host;
    int device_ordinal = -1;      // the driver's DEVICE_ORDINAL; -1 for host memory
    std::uint64_t base = 0;       // start of the address range holding the pointer (0: unknown)
    std::uint64_t size = 0;       // its size: the allocation, or for VMM memory the whole reservation
    bool host_accessible = true;  // the CPU may dereference it (false only for device memory)

    Device device() const noexcept { return device_for(memory_type, device_ordinal); }
};

// One cuPointerGetAttributes call (memory type, managed flag, ordinal, range start and size).
// Without a driver, or without a device, every pointer is plain host memory: no memory can be
// CUDA memory when no driver is there to have allocated it. Error(cuda) only when the driver
// fails (for instance CUDA_ERROR_DEINITIALIZED at exit).
PointerInfo pointer_info(std::uintptr_t ptr);
inline Device device_of_pointer(std::uintptr_t ptr) { return pointer_info(ptr).device(); }

// Whether ptr lies in managed (unified) memory: one attribute asked of the driver, the cheapest
// question it answers about a pointer (stridex.view asks it for every CuPy array, as CuPy's own
// __dlpack__ does). nullopt where the driver cannot answer (no driver or device, no context
// current on this thread, a failed call); never throws.
std::optional<bool> is_managed_memory(std::uintptr_t ptr) noexcept;

// ---- DevicePtr --------------------------------------------------------------------------------

namespace detail {
[[noreturn]] void fail_pointer_range(std::uint64_t address, const char* op, std::string_view operand);
[[noreturn]] void fail_pointer_devices(Device a, Device b, const char* op);
[[noreturn]] void fail_alignment(std::uint64_t alignment);
[[noreturn]] void fail_element_misaligned(std::int64_t bytes, std::size_t element_size);

// A byte or element count: any integer type but bool.
template <class I>
concept Count = std::integral<I> && !std::same_as<I, bool>;

template <Count I>
constexpr bool is_negative(I v) noexcept {
    if constexpr (std::is_signed_v<I>)
        return v < 0;
    else
        return false;
}
// |v| as uint64, exact even for INT64_MIN.
template <Count I>
constexpr std::uint64_t magnitude(I v) noexcept {
    const auto u = static_cast<std::uint64_t>(v);
    return is_negative(v) ? 0 - u : u;
}
// address + sign * bytes through the core's offset_address (address.hpp); Error(value) when the
// result leaves [0, 2^64).
template <Count I>
constexpr std::uint64_t moved_address(std::uint64_t address, I bytes, bool subtract) {
    std::uint64_t out = 0;
    if (!stridex::offset_address(address, magnitude(bytes), is_negative(bytes) != subtract, &out))
        fail_pointer_range(address, subtract ? "-" : "+", std::to_string(bytes));
    return out;
}
}  // namespace detail

class DevicePtr {
public:
    constexpr DevicePtr() noexcept = default;  // null, on cuda:0
    constexpr DevicePtr(std::uint64_t address, Device device) noexcept : address_(address), device_(device) {}

    constexpr std::uint64_t address() const noexcept { return address_; }
    constexpr Device device() const noexcept { return device_; }
    constexpr CUdeviceptr cu() const noexcept { return address_; }
    void* get() const noexcept { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address_)); }
    constexpr explicit operator bool() const noexcept { return address_ != 0; }

    // Byte arithmetic. Results outside [0, 2^64) are Error(value), never a wrapped address.
    template <detail::Count I>
    constexpr DevicePtr operator+(I bytes) const {
        return {detail::moved_address(address_, bytes, /*subtract=*/false), device_};
    }
    template <detail::Count I>
    constexpr DevicePtr operator-(I bytes) const {
        return {detail::moved_address(address_, bytes, /*subtract=*/true), device_};
    }
    template <detail::Count I>
    constexpr DevicePtr& operator+=(I bytes) {
        return *this = *this + bytes;
    }
    template <detail::Count I>
    constexpr DevicePtr& operator-=(I bytes) {
        return *this = *this - bytes;
    }
    template <detail::Count I>
    friend constexpr DevicePtr operator+(I bytes, DevicePtr p) {
        return p + bytes;
    }

    // Bytes from b to a. Both must be on one device, and the distance must fit in int64.
    friend std::int64_t operator-(DevicePtr a, DevicePtr b);

    // Equal: same address on the same device. Ordered only within one device (Error(value) across
    // devices, like the difference), since addresses of two devices say nothing about each other.
    friend constexpr bool operator==(DevicePtr, DevicePtr) noexcept = default;
    friend std::strong_ordering operator<=>(DevicePtr a, DevicePtr b);

    // Alignment to any positive number of bytes (not only powers of two); 0 is Error(value).
    DevicePtr align_up(std::uint64_t alignment) const;
    DevicePtr align_down(std::uint64_t alignment) const;
    bool is_aligned(std::uint64_t alignment) const;

    // "0x7f2a00000000 (cuda:0)"
    std::string to_string() const;

private:
    std::uint64_t address_ = 0;
    Device device_ = Device::cuda(0);
};

// A DevicePtr to elements of T: `p + n` moves n * sizeof(T) bytes, `p - q` counts elements.
template <class T>
class TypedDevicePtr {
public:
    constexpr TypedDevicePtr() noexcept = default;
    // Error(value) if the address is not aligned for T.
    explicit TypedDevicePtr(DevicePtr raw) : raw_(raw) {
        if (!raw.is_aligned(alignof(T)))
            detail::fail_element_misaligned(static_cast<std::int64_t>(raw.address()), alignof(T));
    }

    constexpr DevicePtr raw() const noexcept { return raw_; }
    constexpr std::uint64_t address() const noexcept { return raw_.address(); }
    constexpr Device device() const noexcept { return raw_.device(); }
    T* get() const noexcept { return static_cast<T*>(raw_.get()); }
    constexpr explicit operator bool() const noexcept { return static_cast<bool>(raw_); }

    template <detail::Count I>
    TypedDevicePtr operator+(I n) const {
        return TypedDevicePtr(raw_ + bytes_of(n), Unchecked{});
    }
    template <detail::Count I>
    TypedDevicePtr operator-(I n) const {
        return TypedDevicePtr(raw_ - bytes_of(n), Unchecked{});
    }
    template <detail::Count I>
    TypedDevicePtr& operator+=(I n) {
        return *this = *this + n;
    }
    template <detail::Count I>
    TypedDevicePtr& operator-=(I n) {
        return *this = *this - n;
    }

    // Elements from b to a; Error(value) when the byte distance is not a whole number of elements.
    friend std::int64_t operator-(TypedDevicePtr a, TypedDevicePtr b) {
        const std::int64_t bytes = a.raw_ - b.raw_;
        if (bytes % static_cast<std::int64_t>(sizeof(T)) != 0) detail::fail_element_misaligned(bytes, sizeof(T));
        return bytes / static_cast<std::int64_t>(sizeof(T));
    }
    friend constexpr bool operator==(TypedDevicePtr, TypedDevicePtr) noexcept = default;
    friend std::strong_ordering operator<=>(TypedDevicePtr a, TypedDevicePtr b) { return a.raw_ <=> b.raw_; }

private:
    struct Unchecked {};
    TypedDevicePtr(DevicePtr raw, Unchecked) noexcept : raw_(raw) {}

    // n * sizeof(T) as a signed byte count; Error(value) when it does not fit.
    template <detail::Count I>
    static std::int64_t bytes_of(I n) {
        std::int64_t out = 0;
        if (__builtin_mul_overflow(n, static_cast<std::int64_t>(sizeof(T)), &out))
            detail::fail_pointer_range(0, "element offset", std::to_string(n));
        return out;
    }

    DevicePtr raw_;
};

}  // namespace stridex::cuda

// Hash of the address alone, so a pointer and its integer value land in the same bucket.
template <>
struct std::hash<stridex::cuda::DevicePtr> {
    std::size_t operator()(const stridex::cuda::DevicePtr& p) const noexcept {
        return std::hash<std::uint64_t>{}(p.address());
    }
};
