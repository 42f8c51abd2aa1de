// view_of_pointer / resolve_device: the device of raw memory comes from the driver (a test double
// here, installed with DriverOverride), and a contradicting claim is Error(value).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/from_pointer.hpp"

namespace stridex::cuda {
namespace {

// ---- a fake driver: a few allocations the "driver" knows about ---------------------------------

struct FakeAllocation {
    std::uint64_t base, size;
    unsigned memory_type;  // cu::kMemoryType*
    bool managed;
    int ordinal;
};

std::vector<FakeAllocation>& allocations() {
    static std::vector<FakeAllocation> a;
    return a;
}

CUresult fake_init(unsigned) { return result::success; }
CUresult fake_count(int* n) {
    *n = 2;
    return result::success;
}
CUresult fake_attributes(unsigned count, int* attributes, void** data, CUdeviceptr ptr) {
    const FakeAllocation* found = nullptr;
    for (const auto& a : allocations())
        if (ptr >= a.base && ptr < a.base + a.size) found = &a;
    for (unsigned i = 0; i < count; ++i) {
        std::uint64_t value = 0;  // the driver's answer for memory it does not know
        if (found) {
            switch (attributes[i]) {
                case cu::kPointerAttrMemoryType: value = found->memory_type; break;
                case cu::kPointerAttrIsManaged: value = found->managed; break;
                case cu::kPointerAttrDeviceOrdinal: value = static_cast<std::uint64_t>(found->ordinal); break;
                case cu::kPointerAttrRangeStartAddr: value = found->base; break;
                case cu::kPointerAttrRangeSize: value = found->size; break;
                default: break;
            }
        }
        std::memcpy(data[i], &value, 8);  // stridex gives every attribute an 8-byte slot
    }
    return result::success;
}

DriverTable fake_table() {
    DriverTable t{};
    t.init = &fake_init;
    t.device_get_count = &fake_count;
    t.pointer_get_attributes = &fake_attributes;
    return t;
}

constexpr std::uint64_t kDeviceBase = 0x7f0000000000;  // 4 KiB of device memory on cuda:1
constexpr std::uint64_t kPinnedBase = 0x7f1000000000;
constexpr std::uint64_t kManagedBase = 0x7f2000000000;

class FromPointerFake : public ::testing::Test {
protected:
    void SetUp() override {
        allocations() = {{kDeviceBase, 4096, cu::kMemoryTypeDevice, false, 1},
                         {kPinnedBase, 4096, cu::kMemoryTypeHost, false, 0},
                         {kManagedBase, 4096, cu::kMemoryTypeUnified, true, 0}};
    }
    DriverOverride driver_{fake_table()};
};

void* at(std::uint64_t address) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }

Layout vector_of(std::int64_t n) {
    const std::int64_t shape[] = {n};
    return Layout::contiguous(shape);
}

template <class F>
std::string value_error(F&& f) {
    return ::stridex::testing::expect_error(f, ErrorKind::value).message();
}

TEST_F(FromPointerFake, DeviceComesFromTheMemory) {
    EXPECT_EQ(view_of_pointer(at(kDeviceBase), vector_of(16), dtypes::float32).device(), Device::cuda(1));
    EXPECT_EQ(view_of_pointer(at(kPinnedBase + 64), vector_of(16), dtypes::float32).device(), Device::cuda_host());
    EXPECT_EQ(view_of_pointer(at(kManagedBase), vector_of(16), dtypes::float32).device(), Device::cuda_managed());
    std::vector<float> host(16);
    EXPECT_EQ(view_of_pointer(host.data(), vector_of(16), dtypes::float32).device(), Device::cpu());
}

TEST_F(FromPointerFake, MatchingClaimIsAccepted) {
    const View v = view_of_pointer(at(kDeviceBase), vector_of(16), dtypes::float32, Device::cuda(1), Owner(), true);
    EXPECT_EQ(v.device(), Device::cuda(1));
    EXPECT_TRUE(v.readonly());
}

TEST_F(FromPointerFake, SeedCaseGpuMemoryClaimedAsCpuIsRefused) {
    const std::string message = value_error(
        [] { (void)view_of_pointer(at(kDeviceBase), vector_of(16), dtypes::float32, Device::cpu()); });
    EXPECT_NE(message.find("device cpu was given"), std::string::npos) << message;
    EXPECT_NE(message.find("device memory of cuda:1"), std::string::npos) << message;
}

TEST_F(FromPointerFake, WrongOrdinalIsRefused) {
    const std::string message = value_error(
        [] { (void)view_of_pointer(at(kDeviceBase), vector_of(16), dtypes::float32, Device::cuda(0)); });
    EXPECT_NE(message.find("cuda:0"), std::string::npos);
    EXPECT_NE(message.find("cuda:1"), std::string::npos);
}

TEST_F(FromPointerFake, HostMemoryClaimedAsCudaIsRefused) {
    std::vector<float> host(4);
    value_error([&] { (void)view_of_pointer(host.data(), vector_of(4), dtypes::float32, Device::cuda(0)); });
    value_error([&] { (void)view_of_pointer(host.data(), vector_of(4), dtypes::float32, Device::cuda_host()); });
    // Pinned memory is not plain cpu memory either: DLPack has a device type for it.
    value_error([] { (void)view_of_pointer(at(kPinnedBase), vector_of(4), dtypes::float32, Device::cpu()); });
    value_error([] { (void)view_of_pointer(at(kManagedBase), vector_of(4), dtypes::float32, Device::cuda(0)); });
}

TEST_F(FromPointerFake, ForeignDevicesForMemoryCudaDoesNotKnowStand) {
    std::vector<float> host(4);
    const Device rocm{DeviceType::kROCM, 1};
    EXPECT_EQ(view_of_pointer(host.data(), vector_of(4), dtypes::float32, rocm).device(), rocm);
    // ...but not for memory CUDA does know.
    value_error([&] { (void)view_of_pointer(at(kDeviceBase), vector_of(4), dtypes::float32, rocm); });
}

TEST_F(FromPointerFake, LayoutMustStayInsideTheAllocation) {
    // 4096 bytes = 1024 floats.
    (void)view_of_pointer(at(kDeviceBase), vector_of(1024), dtypes::float32);
    const std::string message = value_error(
        [] { (void)view_of_pointer(at(kDeviceBase), vector_of(1025), dtypes::float32); });
    EXPECT_NE(message.find("outside the allocation"), std::string::npos) << message;
    // Negative strides reach below element 0.
    const std::int64_t shape[] = {4}, back[] = {-1};
    value_error([&] { (void)view_of_pointer(at(kDeviceBase + 8), Layout(shape, back), dtypes::float32); });
    (void)view_of_pointer(at(kDeviceBase + 12), Layout(shape, back), dtypes::float32);
    // Broadcast: one element, whatever the extent.
    const std::int64_t big[] = {100000}, zero[] = {0};
    (void)view_of_pointer(at(kDeviceBase + 4092), Layout(big, zero), dtypes::float32);
}

TEST_F(FromPointerFake, EmptyNullViewTakesTheClaim) {
    EXPECT_EQ(view_of_pointer(nullptr, vector_of(0), dtypes::float32, Device::cuda(1)).device(), Device::cuda(1));
    EXPECT_EQ(view_of_pointer(nullptr, vector_of(0), dtypes::float32).device(), Device::cpu());
}

TEST_F(FromPointerFake, OwnerIsReleasedWhenRefused) {
    int released = 0;
    Owner owner = Owner::from_callback([](void* c) noexcept { ++*static_cast<int*>(c); }, &released);
    EXPECT_THROW((void)view_of_pointer(at(kDeviceBase), vector_of(4), dtypes::float32, Device::cpu(), std::move(owner)),
                 Error);
    EXPECT_EQ(released, 1);
}

TEST(FromPointerNoDriver, HostMemoryWithoutADriverIsCpu) {
    const DriverOverride none("libstridex-no-such-driver.so");
    std::vector<float> host(4);
    EXPECT_EQ(view_of_pointer(host.data(), vector_of(4), dtypes::float32).device(), Device::cpu());
    EXPECT_EQ(view_of_pointer(host.data(), vector_of(4), dtypes::float32, Device::cpu()).device(), Device::cpu());
}

TEST(FromPointerNoDriver, CudaClaimWithoutADriverIsRefused) {
    const DriverOverride none("libstridex-no-such-driver.so");
    std::vector<float> host(4);
    const std::string message = value_error(
        [&] { (void)view_of_pointer(host.data(), vector_of(4), dtypes::float32, Device::cuda(0)); });
    EXPECT_NE(message.find("no CUDA GPU is usable"), std::string::npos) << message;
    EXPECT_NE(message.find("libstridex-no-such-driver.so"), std::string::npos) << message;
    value_error([&] { (void)view_of_pointer(host.data(), vector_of(4), dtypes::float32, Device::cuda_managed()); });
    // Other device types cannot be judged without their runtime: they stand.
    const Device metal{DeviceType::kMetal, 0};
    EXPECT_EQ(view_of_pointer(host.data(), vector_of(4), dtypes::float32, metal).device(), metal);
    // An empty view with no pointer addresses no memory.
    EXPECT_EQ(view_of_pointer(nullptr, vector_of(0), dtypes::float32, Device::cuda(0)).device(), Device::cuda(0));
}

TEST(FromPointerResolve, SpanOfPackedSubbyte) {
    const DriverOverride none("libstridex-no-such-driver.so");
    std::uint8_t packed[2] = {};
    const View v = view_of_pointer(packed, vector_of(4), Dtype::make(DtypeCode::kInt, 4));
    EXPECT_EQ(v.device(), Device::cpu());
    EXPECT_EQ(v.nbytes(), 2);
}

}  // namespace
}  // namespace stridex::cuda
