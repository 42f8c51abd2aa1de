// The byte rules every View obeys (docs/core.md, "Bytes a view may address"), the byte-stride and
// span helpers the interfaces use, and the short echo of foreign text in messages.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "stridex/dlpack.hpp"
#include "stridex/view.hpp"

namespace stridex {
namespace {

using testing::throws_error;

View at(std::uintptr_t address, std::int64_t byte_offset, std::vector<std::int64_t> shape,
        std::vector<std::int64_t> strides, Dtype dtype = dtypes::float64) {
    return View(reinterpret_cast<void*>(address), byte_offset, Layout(shape, strides), dtype, Device::cpu(), false,
                Owner());
}

TEST(ByteRules, ByteStridesFitEvenOnAxesNeverSteppedAlong) {
    // 2**61 elements of 8 bytes: 2**64 bytes, on an axis of extent 1 (no element span at all).
    EXPECT_TRUE(throws_error(
        [] {
            at(0x1000, 0, {1, 2}, {std::int64_t{1} << 61, 1});
        },
        ErrorKind::value, "times the item size 8 overflows int64"));
    const View ok = at(0x1000, 0, {1, 2}, {std::int64_t{1} << 58, 1});
    EXPECT_EQ(ok.byte_stride(0), std::int64_t{1} << 61);
}

TEST(ByteRules, StorageOfABroadcastFits) {
    const std::int64_t big = std::int64_t{1} << 31;
    EXPECT_TRUE(throws_error([&] { at(0x1000, 0, {big, big}, {0, 0}); }, ErrorKind::value, "overflows int64"));
    EXPECT_EQ(at(0x1000, 0, {big, big}, {0, 0}, dtypes::uint8).nbytes(), big * big);  // 2**62 one-byte elements
}

TEST(ByteRules, SpanFitsInBytes) {
    // An element span of 2**61 fits; in bytes (2**64) it does not.
    EXPECT_TRUE(throws_error(
        [] {
            at(0x1000, 0, {2, 2}, {std::int64_t{1} << 61, 1});
        },
        ErrorKind::value, "overflows int64"));
}

TEST(ByteRules, AddressesNeverWrap) {
    // One past the last byte must be an address too: the last 8 bytes below 2**64 are out of reach.
    const std::uintptr_t top = UINTPTR_MAX - 15;
    EXPECT_NO_THROW(at(top, 0, {1}, {1}));
    EXPECT_TRUE(throws_error([&] { at(top, 0, {2}, {1}); }, ErrorKind::value, "leaves the address space"));
    EXPECT_TRUE(throws_error([] { at(0x1000, 0, {2}, {-(std::int64_t{1} << 59)}); }, ErrorKind::value,
                             "leaves the address space"));
    EXPECT_TRUE(throws_error([] { at(0x1000, -0x1001, {0}, {1}); }, ErrorKind::value, "leaves the address space"));
    EXPECT_TRUE(throws_error([&] { at(top, 16, {0}, {1}); }, ErrorKind::value, "leaves the address space"));
    // An empty view may sit at NULL + offset: no pointer arithmetic on NULL happens.
    const View empty = at(0, 9, {0}, {1});
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(empty.ptr()), 9u);
}

TEST(ByteRules, ViewsAtTheLimitsAreDecidedByTheExactChecks) {
    // The one-pass check is sufficient only: what it cannot vouch for, the exact checks decide,
    // so a view right at the int64 limits is still taken, and one just past them still refused.
    const std::int64_t min = INT64_MIN, max = INT64_MAX;
    EXPECT_EQ(at(0x1000, 0, {1}, {min}, dtypes::uint8).byte_stride(0), min);  // |stride| is 2**63
    EXPECT_EQ(at(0x1000, 0, {2}, {max / 2}, dtypes::uint8).byte_span(), (Span{0, max / 2 + 1}));
    EXPECT_EQ(at(0x1000, 0, {1, 3}, {max / 8, 1}).byte_stride(0), max / 8 * 8);
    EXPECT_TRUE(throws_error([] { at(0x1000, 0, {1}, {INT64_MAX / 8 + 1}); }, ErrorKind::value,
                             "times the item size 8 overflows int64"));
    // An empty view's span is never formed, whatever its strides.
    EXPECT_EQ(at(0x1000, 0, {0, 2}, {1, max / 2}, dtypes::uint8).byte_span(), Span{});
}

TEST(ByteRules, WritabilityGivenAtConstruction) {
    std::vector<float> data(4);
    const std::int64_t shape[] = {4};
    for (Writability w : {Writability::writable, Writability::readonly, Writability::unknown, Writability::immutable}) {
        const View v(data.data(), 0, Layout::contiguous(shape), dtypes::float32, Device::cpu(), w, Owner());
        EXPECT_EQ(v.writability(), w);
        EXPECT_EQ(v.readonly(), w == Writability::readonly || w == Writability::immutable);
    }
    // Validated like the bool constructor, and the owner released exactly once when it throws.
    int released = 0;
    const Owner owner = Owner::from_action([&released]() noexcept { ++released; });
    EXPECT_TRUE(throws_error(
        [&] {
            View(nullptr, 0, Layout::contiguous(shape), dtypes::float32, Device::cpu(), Writability::readonly, owner);
        },
        ErrorKind::value, "needs a data pointer"));
    EXPECT_EQ(released, 0);  // `owner` still holds it
}

TEST(ByteRules, DerivedViewsAreChecked) {
    std::vector<double> none;
    const std::int64_t zero[] = {0};
    const View empty(none.data(), 0, Layout::contiguous(zero), dtypes::float64, Device::cpu(), false, Owner());
    const std::int64_t fits[] = {0, std::int64_t{1} << 20, 2};
    EXPECT_EQ(empty.reshape(fits).byte_stride(0), std::int64_t{1} << 24);
    const std::int64_t too_far[] = {0, std::int64_t{1} << 61, 2};
    EXPECT_TRUE(throws_error([&] { (void)empty.reshape(too_far); }, ErrorKind::value, "times the item size 8"));
}

TEST(ByteRules, DLPackImportChecksDataPlusOffset) {
    std::int64_t shape[] = {INT64_MAX};  // bytes [0, 2**63 - 1): a valid span
    std::int64_t strides[] = {1};
    dlpack::DLManagedTensorVersioned t{};
    t.version = {1, 3};
    t.dl_tensor.data = reinterpret_cast<void*>(std::uintptr_t{0x1000});
    t.dl_tensor.ndim = 1;
    t.dl_tensor.dtype = {static_cast<std::uint8_t>(DtypeCode::kUInt), 8, 1};
    t.dl_tensor.device = {1, 0};
    t.dl_tensor.shape = shape;
    t.dl_tensor.strides = strides;
    t.dl_tensor.byte_offset = (std::uint64_t{1} << 63) - 1;  // fits int64; with the span, past 2**64
    static int deleted = 0;
    t.deleter = [](dlpack::DLManagedTensorVersioned*) { ++deleted; };
    EXPECT_TRUE(throws_error([&] { (void)dlpack::import_managed(&t); }, ErrorKind::value, "address space"));
    EXPECT_EQ(deleted, 1);
}

TEST(ByteStrides, ConvertedToElementsOnlyWhenExact) {
    const std::int64_t shape[] = {2, 3};
    const std::int64_t bytes[] = {24, 8};
    EXPECT_EQ(Layout::from_byte_strides(shape, bytes, 8), Layout::contiguous(shape));
    const std::int64_t odd[] = {24, 6};
    EXPECT_TRUE(
        throws_error([&] { (void)Layout::from_byte_strides(shape, odd, 8); }, ErrorKind::unsupported, "multiples"));
    EXPECT_TRUE(throws_error([&] { (void)Layout::from_byte_strides(shape, bytes, 0); }, ErrorKind::value, "itemsize"));
    const std::int64_t one[] = {8};
    EXPECT_TRUE(throws_error([&] { (void)Layout::from_byte_strides(shape, one, 8); }, ErrorKind::value, "same length"));
}

TEST(SpanWithin, NeverOverflows) {
    constexpr std::int64_t kMax = INT64_MAX;
    EXPECT_TRUE(span_within({0, 16}, 0, 16));
    EXPECT_TRUE(span_within({-8, 8}, 8, 16));
    EXPECT_FALSE(span_within({0, 16}, 1, 16));
    EXPECT_FALSE(span_within({-8, 8}, 0, 16));
    EXPECT_FALSE(span_within({0, 2}, kMax, 16));  // offset + span overflows: refused, not wrapped
    EXPECT_FALSE(span_within({0, 2}, kMax - 1, kMax));
    EXPECT_FALSE(span_within({0, 0}, -1, 16));
    EXPECT_TRUE(span_within({0, 0}, 16, 16));  // empty, at the end
    EXPECT_FALSE(span_within({0, 0}, 17, 16));
}

TEST(Messages, EchoAtMost64CharactersOfForeignText) {
    const std::string typestr = "<" + std::string(1000000, 'f');
    const Error e = testing::expect_error([&] { (void)Dtype::from_typestr(typestr); }, ErrorKind::value);
    EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
    const Error n = testing::expect_error([&] { (void)Dtype::from_name(std::string(100000, 'x')); }, ErrorKind::type);
    EXPECT_NE(std::string(n.what()).find("(100000 characters)"), std::string::npos) << n.what();
}

TEST(OwnerIntrospection, CallbackContextOnlyForItsOwnRelease) {
    static int released = 0;
    auto release = [](void*) noexcept { ++released; };
    auto other = [](void*) noexcept {};
    int context = 0;
    {
        const Owner owner = Owner::from_callback(release, &context);
        EXPECT_EQ(owner.callback_context(release), &context);
        EXPECT_EQ(owner.callback_context(other), nullptr);
        EXPECT_EQ(Owner::from_action([]() noexcept {}).callback_context(release), nullptr);
        EXPECT_EQ(Owner().callback_context(release), nullptr);
    }
    EXPECT_EQ(released, 1);
}

}  // namespace
}  // namespace stridex
