// StreamValue (view.hpp): the stream encoding checked in one place, so that a View never holds a
// stream no protocol may carry; and "a NULL handle is the legacy stream", its one home.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "expect_error.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/view.hpp"

namespace stridex {
namespace {

using testing::throws_error;

View host_view(std::vector<float>& buf) {
    return View(buf.data(), 0, Layout::contiguous(std::vector<std::int64_t>{4}), dtypes::float32, Device::cpu(), false,
                Owner());
}

TEST(StreamValue, TakesTheEncodedValues) {
    EXPECT_EQ(StreamValue().encoded(), kNoStream);
    EXPECT_TRUE(StreamValue().is_none());
    EXPECT_EQ(StreamValue(kNoStream).encoded(), kNoStream);
    EXPECT_EQ(StreamValue(kDefaultStream).encoded(), 1);
    EXPECT_EQ(StreamValue(2).encoded(), 2);
    EXPECT_EQ(StreamValue(0x7f0000001000).encoded(), 0x7f0000001000);
    EXPECT_EQ(StreamValue(INTPTR_MAX).encoded(), INTPTR_MAX);
}

TEST(StreamValue, RefusesZeroAndValuesBelowMinusOne) {
    EXPECT_TRUE(throws_error([] { (void)StreamValue(0); }, ErrorKind::value,
                             "stream 0 is forbidden by DLPack and the CUDA array interface"));
    EXPECT_TRUE(throws_error([] { (void)StreamValue(0, "__dlpack__: stream"); }, ErrorKind::value,
                             "__dlpack__: stream 0 is forbidden"));
    EXPECT_TRUE(throws_error([] { (void)StreamValue(-2); }, ErrorKind::value,
                             "stream must be -1 (none), 1, 2 or a stream handle, found -2"));
    EXPECT_TRUE(throws_error([] { (void)StreamValue(INTPTR_MIN); }, ErrorKind::value, "found -9223372036854775808"));
}

TEST(StreamValue, NullHandleIsTheLegacyStream) {
    EXPECT_EQ(StreamValue::from_handle(nullptr).encoded(), kDefaultStream);
    EXPECT_EQ(StreamValue::from_handle(std::uintptr_t{0}).encoded(), kDefaultStream);
    EXPECT_EQ(StreamValue::from_handle(reinterpret_cast<void*>(2)).encoded(), 2);  // CU_STREAM_PER_THREAD
    EXPECT_EQ(StreamValue::from_handle(std::uintptr_t{0x5010}).encoded(), 0x5010);
    // No stream handle lies above 2**63 - 1, and such a value would read as -1 ("no stream").
    EXPECT_TRUE(
        throws_error([] { (void)StreamValue::from_handle(UINTPTR_MAX); }, ErrorKind::value, "is no stream handle"));
    static_assert(StreamValue::from_handle(std::uintptr_t{0}) == StreamValue(kDefaultStream));
    // The CUDA layer's StreamRef takes the rule from here.
    EXPECT_EQ(cuda::StreamRef::from_handle(nullptr), cuda::StreamRef::legacy());
}

TEST(StreamValue, AViewNeverHoldsAnInvalidStream) {
    std::vector<float> buf(4);
    View v = host_view(buf);
    EXPECT_EQ(v.stream(), kNoStream);
    v.set_stream(kDefaultStream);
    EXPECT_EQ(v.stream(), kDefaultStream);
    v.set_stream(StreamValue(0x5010));
    EXPECT_EQ(v.stream(), 0x5010);
    EXPECT_TRUE(throws_error([&] { v.set_stream(std::intptr_t{0}); }, ErrorKind::value, "0 is forbidden"));
    EXPECT_TRUE(throws_error([&] { v.set_stream(std::intptr_t{-7}); }, ErrorKind::value, "found -7"));
    EXPECT_EQ(v.stream(), 0x5010);  // the refused value was never stored
    v.set_stream(kNoStream);
    EXPECT_EQ(v.stream(), kNoStream);
    // Derived views and copies carry the (valid) stream along.
    v.set_stream(2);
    EXPECT_EQ(v.slice(0, Slice{1, 3, 1}).stream(), 2);
}

}  // namespace
}  // namespace stridex
