// The one "address plus signed offset, no wrap" (stridex/address.hpp), at the edges of the address
// space and of the offset's type, and its users: View's byte rules, DevicePtr arithmetic.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "expect_error.hpp"
#include "stridex/address.hpp"
#include "stridex/cuda/pointer.hpp"
#include "stridex/view.hpp"

namespace stridex {
namespace {

using testing::throws_error;

constexpr std::uint64_t kTop = std::numeric_limits<std::uint64_t>::max();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

std::uint64_t moved(std::uint64_t address, std::int64_t offset) {
    std::uint64_t out = 0;
    EXPECT_TRUE(offset_address(address, offset, &out)) << address << " + " << offset;
    return out;
}

bool wraps(std::uint64_t address, std::int64_t offset) {
    std::uint64_t out = 0;
    return !offset_address(address, offset, &out);
}

TEST(Address, SignedOffsetsInsideTheAddressSpace) {
    EXPECT_EQ(moved(0x1000, 0), 0x1000u);
    EXPECT_EQ(moved(0x1000, 16), 0x1010u);
    EXPECT_EQ(moved(0x1000, -0x1000), 0u);  // down to 0 exactly
    EXPECT_EQ(moved(kTop - 1, 1), kTop);    // up to the last address exactly
    EXPECT_EQ(moved(0, kMax), static_cast<std::uint64_t>(kMax));
    EXPECT_EQ(moved(kTop, kMin), kTop - (std::uint64_t{1} << 63));  // INT64_MIN: its magnitude is exact
}

TEST(Address, OneStepPastEitherEndWraps) {
    EXPECT_TRUE(wraps(0, -1));
    EXPECT_TRUE(wraps(0x1000, -0x1001));
    EXPECT_TRUE(wraps(kTop, 1));
    EXPECT_TRUE(wraps(kTop - kMax + 1, kMax));  // kTop - kMax + 1 + kMax = 2**64
    EXPECT_FALSE(wraps(kTop - kMax, kMax));
    EXPECT_TRUE(wraps((std::uint64_t{1} << 63) - 1, kMin));
    EXPECT_FALSE(wraps(std::uint64_t{1} << 63, kMin));
}

TEST(Address, MagnitudeFormTakesOffsetsBeyondInt64) {
    std::uint64_t out = 0;
    EXPECT_TRUE(offset_address(0, kTop, /*negative=*/false, &out));
    EXPECT_EQ(out, kTop);
    EXPECT_FALSE(offset_address(1, kTop, /*negative=*/false, &out));
    EXPECT_TRUE(offset_address(kTop, kTop, /*negative=*/true, &out));
    EXPECT_EQ(out, 0u);
    EXPECT_FALSE(offset_address(kTop - 1, kTop, /*negative=*/true, &out));
}

TEST(Address, UsableAtCompileTime) {
    constexpr bool fits = [] {
        std::uint64_t out = 0;
        return offset_address(8, std::int64_t{-8}, &out) && out == 0;
    }();
    static_assert(fits);
}

TEST(Address, ViewsAndDevicePtrsRefuseWhatWraps) {
    // The View's byte rules and DevicePtr's arithmetic answer as offset_address does, at its edges.
    const auto view_at = [](std::uint64_t address, std::int64_t byte_offset) {
        return View(reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), byte_offset,
                    Layout::contiguous(std::vector<std::int64_t>{1}), dtypes::uint8, Device::cpu(), false, Owner());
    };
    EXPECT_NO_THROW(view_at(kTop - 1, 0));  // the byte at 2**64 - 2, one past it at 2**64 - 1
    EXPECT_TRUE(throws_error([&] { view_at(kTop, 0); }, ErrorKind::value, "leaves the address space"));
    EXPECT_NO_THROW(view_at(0x1000, -0x1000));
    EXPECT_TRUE(throws_error([&] { view_at(0x1000, -0x1001); }, ErrorKind::value, "leaves the address space"));

    const cuda::DevicePtr p(0x1000, Device::cuda(0));
    EXPECT_EQ((p - 0x1000).address(), 0u);
    EXPECT_TRUE(throws_error([&] { (void)(p - 0x1001); }, ErrorKind::value));
    EXPECT_TRUE(throws_error([&] { (void)(p + kTop); }, ErrorKind::value));
    EXPECT_EQ((cuda::DevicePtr(kTop - 1, Device::cuda(0)) + 1).address(), kTop);
    EXPECT_TRUE(throws_error([&] { (void)(p + kMin); }, ErrorKind::value));
    EXPECT_EQ((cuda::DevicePtr(std::uint64_t{1} << 63, Device::cuda(0)) + kMin).address(), 0u);
}

}  // namespace
}  // namespace stridex
