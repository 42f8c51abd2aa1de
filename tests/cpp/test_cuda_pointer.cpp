// DevicePtr and TypedDevicePtr arithmetic, and pointer_info through the fake driver.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <unordered_map>

#include "expect_error.hpp"
#include "fake_driver.hpp"
#include "stridex/cuda/pointer.hpp"

namespace {

using namespace stridex_test;
using stridex::Device;
using stridex::Error;
using stridex::ErrorKind;

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
constexpr std::int64_t kMin64 = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax64 = std::numeric_limits<std::int64_t>::max();

template <class F>
std::string value_error(F&& f) {
    return ::stridex::testing::expect_error(f, ErrorKind::value).message();
}

TEST(DevicePtr, ByteArithmetic) {
    const DevicePtr p(0x7f2a00000000, Device::cuda(1));
    EXPECT_EQ((p + 16).address(), 0x7f2a00000010u);
    EXPECT_EQ((p + 16).device(), Device::cuda(1));
    EXPECT_EQ((16 + p), p + 16);
    EXPECT_EQ((p - 16).address(), 0x7f29fffffff0u);
    EXPECT_EQ((p + -16), p - 16);
    EXPECT_EQ((p - -16), p + 16);
    EXPECT_EQ(p + std::size_t{1}, p + 1);
    DevicePtr q = p;
    q += 100;
    q -= 36;
    EXPECT_EQ(q - p, 64);
    EXPECT_EQ(p - q, -64);
    EXPECT_EQ(p - p, 0);
    EXPECT_EQ(DevicePtr(5, Device::cuda(0)) + std::uint8_t{250}, DevicePtr(255, Device::cuda(0)));
}

TEST(DevicePtr, DefaultIsNullOnCuda0) {
    constexpr DevicePtr p;
    static_assert(p.address() == 0 && !p);
    EXPECT_EQ(p.device(), Device::cuda(0));
    EXPECT_TRUE(static_cast<bool>(p + 1));
    EXPECT_EQ(p.cu(), 0ull);
    EXPECT_EQ(p.get(), nullptr);
}

TEST(DevicePtr, OutOfRangeResultsAreValueErrors) {
    const Device dev = Device::cuda(0);
    EXPECT_EQ(value_error([&] { (void)(DevicePtr(0x10, dev) - 0x20); }),
              "pointer arithmetic leaves the 64-bit address space: 0x10 - 32");
    EXPECT_EQ(value_error([&] { (void)(DevicePtr(kMax, dev) + 1); }),
              "pointer arithmetic leaves the 64-bit address space: 0xffffffffffffffff + 1");
    value_error([&] { (void)(DevicePtr(0, dev) + -1); });
    value_error([&] { (void)(DevicePtr(5, dev) + kMin64); });
    EXPECT_EQ((DevicePtr(kMax, dev) + kMin64).address(), kMax - (std::uint64_t{1} << 63));
    // Unsigned counts beyond int64 are not truncated.
    EXPECT_EQ((DevicePtr(1, dev) + (kMax - 1)).address(), kMax);
    value_error([&] { (void)(DevicePtr(2, dev) + (kMax - 1)); });
    DevicePtr p(8, dev);
    value_error([&] { p -= 9; });
    EXPECT_EQ(p.address(), 8u);  // unchanged after a failed compound assignment
}

TEST(DevicePtr, DifferenceMustFitAndShareADevice) {
    EXPECT_EQ(value_error([] { (void)(DevicePtr(1, Device::cuda(0)) - DevicePtr(1, Device::cuda(1))); }),
              "cannot subtract pointers of different devices (cuda:0 and cuda:1)");
    value_error([] { (void)(DevicePtr(kMax, Device::cuda(0)) - DevicePtr(0, Device::cuda(0))); });
    EXPECT_EQ(DevicePtr(std::uint64_t(kMax64), Device::cuda(0)) - DevicePtr(0, Device::cuda(0)), kMax64);
    EXPECT_EQ(DevicePtr(0, Device::cuda(0)) - DevicePtr(std::uint64_t{1} << 63, Device::cuda(0)), kMin64);
}

TEST(DevicePtr, Comparisons) {
    const DevicePtr a(100, Device::cuda(0)), b(200, Device::cuda(0));
    EXPECT_TRUE(a < b && b > a && a <= a && a >= a && a != b);
    EXPECT_EQ(a, DevicePtr(100, Device::cuda(0)));
    EXPECT_NE(a, DevicePtr(100, Device::cuda(1)));  // same number, other device
    EXPECT_EQ(value_error([&] { (void)(a < DevicePtr(300, Device::cuda(1))); }),
              "cannot order pointers of different devices (cuda:0 and cuda:1)");
}

TEST(DevicePtr, HashIsTheAddressHash) {
    const DevicePtr p(0xdead0000, Device::cuda(0));
    EXPECT_EQ(std::hash<DevicePtr>{}(p), std::hash<std::uint64_t>{}(0xdead0000));
    std::unordered_map<DevicePtr, int> m{{p, 1}};
    EXPECT_EQ(m.at(DevicePtr(0xdead0000, Device::cuda(0))), 1);
}

TEST(DevicePtr, Alignment) {
    const DevicePtr p(0x1001, Device::cuda(0));
    EXPECT_EQ(p.align_up(256).address(), 0x1100u);
    EXPECT_EQ(p.align_down(256).address(), 0x1000u);
    EXPECT_FALSE(p.is_aligned(2));
    EXPECT_TRUE(p.is_aligned(1));
    EXPECT_TRUE(p.align_up(256).is_aligned(256));
    EXPECT_EQ(p.align_up(0x1001), p);  // already a multiple
    // Any positive alignment, not only powers of two.
    EXPECT_EQ(DevicePtr(10, Device::cuda(0)).align_up(12).address(), 12u);
    EXPECT_EQ(DevicePtr(25, Device::cuda(0)).align_down(12).address(), 24u);
    EXPECT_EQ(value_error([&] { (void)p.align_up(0); }), "alignment must be a positive number of bytes, found 0");
    value_error([&] { (void)p.is_aligned(0); });
    value_error([] { (void)DevicePtr(kMax, Device::cuda(0)).align_up(16); });
    EXPECT_EQ(DevicePtr(kMax, Device::cuda(0)).align_down(16).address(), kMax - 15);
}

TEST(DevicePtr, ToString) {
    EXPECT_EQ(DevicePtr(0x7f2a00000000, Device::cuda(0)).to_string(), "0x7f2a00000000 (cuda:0)");
}

TEST(TypedDevicePtr, ElementArithmetic) {
    const TypedDevicePtr<float> p(DevicePtr(0x1000, Device::cuda(0)));
    EXPECT_EQ((p + 3).address(), 0x100cu);
    EXPECT_EQ((p + 3) - p, 3);
    EXPECT_EQ(p - (p + 3), -3);
    auto q = p;
    q += 10;
    q -= 2;
    EXPECT_EQ(q.address(), 0x1020u);
    EXPECT_EQ(q.raw(), DevicePtr(0x1020, Device::cuda(0)));
    EXPECT_TRUE(p < q);
    EXPECT_EQ(q.get(), reinterpret_cast<float*>(std::uintptr_t{0x1020}));
}

TEST(TypedDevicePtr, ChecksAlignmentAndWholeElements) {
    EXPECT_EQ(value_error([] { TypedDevicePtr<double> p(DevicePtr(0x1004, Device::cuda(0))); }),
              "byte offset 4100 is not a multiple of the element size 8");
    struct Rgb {
        float r, g, b;
    };
    const TypedDevicePtr<Rgb> a(DevicePtr(0x1000, Device::cuda(0)));
    const TypedDevicePtr<Rgb> b(DevicePtr(0x1004, Device::cuda(0)));  // aligned for float, not a whole Rgb away
    value_error([&] { (void)(b - a); });
    EXPECT_EQ(((a + 2) - a), 2);
    EXPECT_EQ((a + 2).address(), 0x1018u);
    value_error([&] { (void)(a + kMax64); });                                             // n * sizeof(T) overflows
    value_error([] { (void)(TypedDevicePtr<Rgb>(DevicePtr(8, Device::cuda(0))) - 1); });  // below address 0
}

TEST(PointerInfo, ClassifiesMemoryInOneCall) {
    FakeCuda fake(2);
    fake->add_pointer_range(0x7000000000, 1 * MiB, cu::kMemoryTypeDevice, false, 1);
    fake->add_pointer_range(0x8000000000, 4096, cu::kMemoryTypeHost, false, 0);
    fake->add_pointer_range(0x9000000000, 2 * MiB, cu::kMemoryTypeDevice, true, 0);

    const PointerInfo dev = pointer_info(0x7000000100);
    EXPECT_EQ(dev.memory_type, MemoryType::device);
    EXPECT_EQ(dev.device_ordinal, 1);
    EXPECT_EQ(dev.base, 0x7000000000u);
    EXPECT_EQ(dev.size, 1 * MiB);
    EXPECT_FALSE(dev.host_accessible);
    EXPECT_EQ(dev.device(), Device::cuda(1));

    const PointerInfo pinned = pointer_info(0x8000000010);
    EXPECT_EQ(pinned.memory_type, MemoryType::pinned_host);
    EXPECT_TRUE(pinned.host_accessible);
    EXPECT_EQ(pinned.device(), Device::cuda_host());

    const PointerInfo managed = pointer_info(0x9000000000);
    EXPECT_EQ(managed.memory_type, MemoryType::managed);
    EXPECT_TRUE(managed.host_accessible);
    EXPECT_EQ(device_of_pointer(0x9000000000), Device::cuda_managed());

    const PointerInfo host = pointer_info(0x1234);
    EXPECT_EQ(host.memory_type, MemoryType::host);
    EXPECT_EQ(host.device_ordinal, -1);
    EXPECT_EQ(host.base, 0u);
    EXPECT_EQ(host.size, 0u);
    EXPECT_EQ(host.device(), Device::cpu());

    EXPECT_EQ(fake->take_log().size(), 5u);  // one driver call per query
    EXPECT_EQ(to_string(MemoryType::pinned_host), "pinned_host");
}

TEST(PointerInfo, IsManagedMemoryAsksOneAttributeAndNeverThrows) {
    FakeCuda fake(1);
    fake->add_pointer_range(0x7000000000, MiB, cu::kMemoryTypeDevice, false, 0);
    fake->add_pointer_range(0x9000000000, MiB, cu::kMemoryTypeDevice, true, 0);
    EXPECT_EQ(is_managed_memory(0x7000000010), std::optional<bool>(false));
    EXPECT_EQ(is_managed_memory(0x9000000010), std::optional<bool>(true));
    EXPECT_EQ(is_managed_memory(0x1234), std::optional<bool>(false));  // host memory: not managed
    EXPECT_EQ(fake->take_log().size(), 3u);                            // one driver call per question
    // A driver that cannot answer (no context on this thread, a failed call): no answer, no throw.
    fake->pointer_attributes_need_context = true;
    EXPECT_EQ(is_managed_memory(0x9000000010), std::nullopt);
    EXPECT_TRUE(fake->ctx_log.empty());  // and no context made for the question
    fake->pointer_attributes_need_context = false;
    fake->fail_nth("cuPointerGetAttributes", 1, result::not_initialized);
    EXPECT_EQ(is_managed_memory(0x9000000010), std::nullopt);
}

TEST(PointerInfo, IsManagedMemoryWithoutADeviceHasNoAnswer) {
    FakeCuda fake(0);
    EXPECT_EQ(is_managed_memory(0x9000000010), std::nullopt);
}

TEST(PointerInfo, RetriesUnderAContextOnlyWhenTheDriverAsks) {
    FakeCuda fake;
    fake->add_pointer_range(0x7000000000, MiB, cu::kMemoryTypeDevice, false, 0);
    EXPECT_EQ(pointer_info(0x7000000000).memory_type, MemoryType::device);
    EXPECT_TRUE(fake->ctx_log.empty());  // no context was created for the question

    fake->pointer_attributes_need_context = true;
    EXPECT_EQ(pointer_info(0x7000000000).memory_type, MemoryType::device);
    EXPECT_EQ(fake->ctx_log, (std::vector<std::string>{"retain dev0", "set ctx0", "set none"}));
    EXPECT_EQ(fake->current, nullptr);
}

TEST(PointerInfo, ADriverThatRefusesThisProcessMeansHost) {
    // What a child forked after CUDA was initialised sees: every call is NOT_INITIALIZED.
    FakeCuda fake;
    fake->add_pointer_range(0x7000000000, MiB, cu::kMemoryTypeDevice, false, 0);
    for (CUresult refused : {result::not_initialized, result::deinitialized}) {
        fake->fail_nth("cuPointerGetAttributes", 1, refused);
        EXPECT_EQ(pointer_info(0x7000000000).memory_type, MemoryType::host);
    }
    // Any other failure is still an error.
    fake->fail_nth("cuPointerGetAttributes", 1, result::invalid_value);
    EXPECT_THROW((void)pointer_info(0x7000000000), DriverError);
}

TEST(PointerInfo, NoDevicesMeansHost) {
    FakeCuda fake(0);
    EXPECT_EQ(pointer_info(0x7000000000).memory_type, MemoryType::host);
    EXPECT_TRUE(fake->log.empty());
}

}  // namespace
