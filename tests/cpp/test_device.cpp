// Tests for stridex::Device: DLPack device types, names, parsing and accessibility. Expected values
// are written out here independently of src/core/device.cpp's table.
#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "stridex/device.hpp"
#include "stridex/error.hpp"

namespace stridex {
// gtest prints unknown types as bytes; a name makes failures readable.
static void PrintTo(Device d, std::ostream* os) { *os << d.name(); }
}  // namespace stridex

namespace {

using stridex::Device;
using stridex::DeviceType;
using stridex::Error;
using stridex::ErrorKind;

// Passes when f throws stridex::Error of `kind` whose message contains `needle`.

// Everything known about each type, restated from DLPack and the stridex brief.
struct TypeCase {
    DeviceType type;
    int value;         // DLPack's number
    const char* name;  // device_type_name
    bool single;       // name omits ":0"
    bool host;         // host_accessible
    bool cuda;         // is_cuda_family
};

const std::vector<TypeCase>& type_cases() {
    static const std::vector<TypeCase> cases = {
        {DeviceType::kCPU, 1, "cpu", true, true, false},
        {DeviceType::kCUDA, 2, "cuda", false, false, true},
        {DeviceType::kCUDAHost, 3, "cuda_host", true, true, true},
        {DeviceType::kOpenCL, 4, "opencl", false, false, false},
        {DeviceType::kVulkan, 7, "vulkan", false, false, false},
        {DeviceType::kMetal, 8, "metal", false, false, false},
        {DeviceType::kVPI, 9, "vpi", false, false, false},
        {DeviceType::kROCM, 10, "rocm", false, false, false},
        {DeviceType::kROCMHost, 11, "rocm_host", true, true, false},
        {DeviceType::kExtDev, 12, "ext_dev", false, false, false},
        {DeviceType::kCUDAManaged, 13, "cuda_managed", true, true, true},
        {DeviceType::kOneAPI, 14, "oneapi", false, false, false},
        {DeviceType::kWebGPU, 15, "webgpu", false, false, false},
        {DeviceType::kHexagon, 16, "hexagon", false, false, false},
        {DeviceType::kMAIA, 17, "maia", false, false, false},
        {DeviceType::kTrn, 18, "trn", false, false, false},
        {DeviceType::kTPU, 19, "tpu", false, false, false},
        {DeviceType::kTPUHost, 20, "tpu_host", true, true, false},
        {DeviceType::kAscend, 21, "ascend", false, false, false},
    };
    return cases;
}

TEST(Device, LayoutMatchesDLDevice) {
    struct DLDeviceLike {
        std::int32_t device_type;
        std::int32_t device_id;
    };
    EXPECT_EQ(sizeof(Device), 8u);
    EXPECT_EQ(offsetof(Device, type), 0u);
    EXPECT_EQ(offsetof(Device, id), 4u);
    EXPECT_EQ(std::bit_cast<Device>(DLDeviceLike{2, 3}), Device::cuda(3));
    EXPECT_EQ(std::bit_cast<DLDeviceLike>(Device::cuda_managed()).device_type, 13);
}

TEST(Device, TypeValuesAreDLPack) {
    for (const TypeCase& c : type_cases()) EXPECT_EQ(static_cast<int>(c.type), c.value) << c.name;
}

TEST(Device, DefaultAndFactories) {
    static_assert(Device{} == Device::cpu());
    static_assert(Device::cuda(2).id == 2);
    EXPECT_EQ(Device{}.type, DeviceType::kCPU);
    EXPECT_EQ(Device{}.id, 0);
    EXPECT_EQ(Device::cuda(3), (Device{DeviceType::kCUDA, 3}));
    EXPECT_EQ(Device::cuda_host(), (Device{DeviceType::kCUDAHost, 0}));
    EXPECT_EQ(Device::cuda_managed(), (Device{DeviceType::kCUDAManaged, 0}));
    EXPECT_NE(Device::cuda(0), Device::cuda(1));
    EXPECT_NE(Device::cuda(0), Device::cuda_host());
}

TEST(Device, FromRawAcceptsEveryKnownType) {
    for (const TypeCase& c : type_cases()) {
        SCOPED_TRACE(c.name);
        EXPECT_EQ(Device::from_raw(c.value, 0), (Device{c.type, 0}));
        EXPECT_EQ(Device::from_raw(c.value, 5), (Device{c.type, 5}));
    }
}

TEST(Device, FromRawRejectsUnknownTypes) {
    for (std::int32_t value : {0, 5, 6, 22, 100, -1, std::numeric_limits<std::int32_t>::max()}) {
        SCOPED_TRACE(value);
        EXPECT_ERROR(Device::from_raw(value, 0), unsupported,
                     "unsupported DLPack device type " + std::to_string(value));
    }
}

TEST(Device, FromRawRejectsNegativeIds) {
    EXPECT_ERROR(Device::from_raw(2, -1), value, "device id must be >= 0, found -1 for cuda");
    EXPECT_ERROR(Device::from_raw(1, std::numeric_limits<std::int32_t>::min()), value, "found -2147483648");
}

TEST(Device, TypeNames) {
    std::set<std::string> seen;
    for (const TypeCase& c : type_cases()) {
        EXPECT_EQ(stridex::device_type_name(c.type), c.name);
        EXPECT_TRUE(seen.insert(c.name).second) << "duplicate " << c.name;
    }
    EXPECT_EQ(stridex::device_type_name(static_cast<DeviceType>(5)), "unknown");
    EXPECT_EQ(stridex::device_type_name(static_cast<DeviceType>(0)), "unknown");
}

TEST(Device, Names) {
    for (const TypeCase& c : type_cases()) {
        SCOPED_TRACE(c.name);
        const std::string base = c.name;
        EXPECT_EQ((Device{c.type, 0}).name(), c.single ? base : base + ":0");
        EXPECT_EQ((Device{c.type, 3}).name(), base + ":3");
    }
    EXPECT_EQ(Device::cpu().name(), "cpu");
    EXPECT_EQ(Device::cuda(0).name(), "cuda:0");
    EXPECT_EQ(Device::cuda(7).name(), "cuda:7");
    EXPECT_EQ(Device::cuda_host().name(), "cuda_host");
    EXPECT_EQ(Device::cuda_managed().name(), "cuda_managed");
    EXPECT_EQ((Device{DeviceType::kROCM, 1}).name(), "rocm:1");
    EXPECT_EQ((Device{DeviceType::kTPUHost, 0}).name(), "tpu_host");
    EXPECT_EQ((Device{DeviceType::kCPU, 2}).name(), "cpu:2");
    EXPECT_EQ((Device{static_cast<DeviceType>(5), 1}).name(), "device(type=5, id=1)");
}

TEST(Device, NameParseRoundTripsForEveryType) {
    for (const TypeCase& c : type_cases()) {
        for (std::int32_t id : {0, 1, 7, 42, std::numeric_limits<std::int32_t>::max()}) {
            const Device d{c.type, id};
            if (c.single && id != 0) continue;  // one memory space: no such device (below)
            EXPECT_EQ(Device::parse(d.name()), d) << d.name();
        }
    }
}

// A single-instance type (cpu, cuda_host, ...) has one memory space per host: another ordinal
// names nothing, as text or as a pair a caller wrote; an import's odd id stays the producer's.
TEST(Device, SingleInstanceTypesTakeOnlyOrdinalZero) {
    for (const TypeCase& c : type_cases()) {
        if (!c.single) {
            EXPECT_EQ(Device::from_pair(c.value, 3), (Device{c.type, 3})) << c.name;
            continue;
        }
        const std::string text = std::string(c.name) + ":1";
        EXPECT_ERROR(Device::parse(text), value,
                     "invalid device '" + text + "': " + c.name + " has one memory space, so its only ordinal is 0 (" +
                         c.name + " or " + c.name + ":0)");
        EXPECT_ERROR(Device::from_pair(c.value, 2), value,
                     "invalid device (" + std::to_string(c.value) + ", 2): " + c.name + " has one memory space");
        EXPECT_EQ(Device::from_pair(c.value, 0), (Device{c.type, 0}));
        EXPECT_EQ(Device::from_raw(c.value, 2), (Device{c.type, 2}));
    }
}

TEST(Device, ParseAcceptsBareNamesAsOrdinalZero) {
    for (const TypeCase& c : type_cases()) EXPECT_EQ(Device::parse(c.name), (Device{c.type, 0})) << c.name;
    EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
    EXPECT_EQ(Device::parse("cpu:0"), Device::cpu());
    EXPECT_EQ(Device::parse("cuda_host:0"), Device::cuda_host());
    EXPECT_EQ(Device::parse("rocm:12"), (Device{DeviceType::kROCM, 12}));
}

TEST(Device, ParseRejectsMalformedText) {
    for (const char* text : {"",
                             "gpu",
                             "cuda:-1",
                             "cuda:x",
                             "cuda:",
                             "cuda:1x",
                             "cuda:+1",
                             "cuda: 1",
                             " cuda",
                             "cuda ",
                             "CUDA",
                             "Cuda:0",
                             ":0",
                             "cuda:0:1",
                             "cuda::0",
                             "cuda:99999999999",
                             "cuda:2147483648",
                             "cuda_hostx",
                             "cpu0",
                             "5:0",
                             "unknown"}) {
        SCOPED_TRACE(text);
        EXPECT_ERROR(Device::parse(text), value, std::string("invalid device '") + text + "'");
    }
}

TEST(Device, AccessibilityTable) {
    for (const TypeCase& c : type_cases()) {
        SCOPED_TRACE(c.name);
        for (std::int32_t id : {0, 1}) {
            const Device d{c.type, id};
            EXPECT_EQ(d.host_accessible(), c.host);
            EXPECT_EQ(d.is_cuda_family(), c.cuda);
            // A GPU's own memory (device or managed): CUDA memory that is not pinned host memory.
            EXPECT_EQ(d.is_cuda_device_or_managed(), c.cuda && c.type != DeviceType::kCUDAHost);
        }
    }
    // A value outside the enum is accessible from nowhere.
    const Device unknown{static_cast<DeviceType>(6), 0};
    EXPECT_FALSE(unknown.host_accessible());
    EXPECT_FALSE(unknown.is_cuda_family());
    EXPECT_FALSE(unknown.is_cuda_device_or_managed());
}

}  // namespace
