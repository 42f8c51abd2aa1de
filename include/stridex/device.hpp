// stridex::Device: where memory lives, bit-for-bit a DLPack DLDevice.
//
// The per-type facts (name, host accessibility) live once, as a table, in src/core/device.cpp;
// which types are CUDA memory is is_cuda_family (and is_cuda_device_or_managed), inline below
// (every import asks).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace stridex {

// DLPack device types (values are ABI). 5 and 6 are unused by DLPack; 19-21 are in DLPack's
// unreleased head, but JAX already emits kTPUHost.
enum class DeviceType : std::int32_t {
    kCPU = 1,
    kCUDA = 2,
    kCUDAHost = 3,  // pinned host memory
    kOpenCL = 4,
    kVulkan = 7,
    kMetal = 8,
    kVPI = 9,
    kROCM = 10,
    kROCMHost = 11,
    kExtDev = 12,
    kCUDAManaged = 13,
    kOneAPI = 14,
    kWebGPU = 15,
    kHexagon = 16,
    kMAIA = 17,
    kTrn = 18,
    kTPU = 19,
    kTPUHost = 20,
    kAscend = 21,
};

struct Device {
    DeviceType type = DeviceType::kCPU;
    std::int32_t id = 0;

    static constexpr Device cpu() noexcept { return {DeviceType::kCPU, 0}; }
    static constexpr Device cuda(std::int32_t id) noexcept { return {DeviceType::kCUDA, id}; }
    // Pinned and managed memory are not tied to one GPU, so DLPack gives them id 0.
    static constexpr Device cuda_host() noexcept { return {DeviceType::kCUDAHost, 0}; }
    static constexpr Device cuda_managed() noexcept { return {DeviceType::kCUDAManaged, 0}; }

    // Checked: an unknown type is Error(unsupported) (DLPack may add types), a negative id
    // Error(value).
    static Device from_raw(std::int32_t type, std::int32_t id);
    // A (device_type, device_id) pair a caller wrote (a Python argument): from_raw's rules, and a
    // single-instance type (cpu, cuda_host, cuda_managed ...: one memory space per host) takes only
    // ordinal 0, Error(value) otherwise. Imports keep from_raw: a producer's odd id is its own.
    static Device from_pair(std::int32_t type, std::int32_t id);

    // "cpu", "cuda:0", "cuda_host", "rocm:1". Single-instance host types print no ordinal when it
    // is 0. parse() is the inverse and also takes a bare type name as ordinal 0 ("cuda"); it refuses
    // another ordinal of a single-instance type ("cpu:1": there is one host memory), Error(value).
    std::string name() const;
    static Device parse(std::string_view text);

    bool host_accessible() const noexcept;  // the CPU may dereference the pointer
    // Memory the CUDA driver owns (device, pinned, managed): CUDA kernels may dereference it, and
    // its pending work is stream-ordered. The one test of "is this CUDA memory" in stridex; inline,
    // since every import asks.
    constexpr bool is_cuda_family() const noexcept {
        return type == DeviceType::kCUDA || type == DeviceType::kCUDAHost || type == DeviceType::kCUDAManaged;
    }
    // A GPU's memory: device or managed, not pinned. What CUDA kernels take as device memory (the CUDA
    // array interface describes only these), and where a consumer works on a CUDA stream: readers
    // of pinned memory are host code as often, and take stream=None.
    constexpr bool is_cuda_device_or_managed() const noexcept {
        return type == DeviceType::kCUDA || type == DeviceType::kCUDAManaged;
    }

    friend constexpr bool operator==(Device, Device) = default;
};

static_assert(sizeof(Device) == 8, "Device must match DLDevice");
static_assert(std::is_trivially_copyable_v<Device> && std::is_standard_layout_v<Device>);

// "cpu", "cuda", "cuda_host"...; "unknown" for a value outside DeviceType.
std::string_view device_type_name(DeviceType type) noexcept;

}  // namespace stridex
