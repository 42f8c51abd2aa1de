// order(): record + wait only when needed, pooled events; Stream and Event RAII.
#include <gtest/gtest.h>

#include "fake_driver.hpp"
#include "stridex/cuda/stream.hpp"

namespace {

using namespace stridex_test;
using stridex::Device;
using stridex::Error;
using stridex::ErrorKind;
using Log = std::vector<std::string>;

const StreamRef kS1(0x5010), kS2(0x5020);

TEST(CudaOrder, NothingToDoNeedsNoDriver) {
    DriverOverride missing("libcuda_does_not_exist.so.1");
    EXPECT_NO_THROW(order(StreamRef::none(), kS1, Device::cuda(0)));  // no pending work
    EXPECT_NO_THROW(order(kS1, kS1, Device::cuda(0)));                // same stream
    EXPECT_NO_THROW(order(kS1, StreamRef::none(), Device::cuda(0)));  // consumer opted out
    EXPECT_NO_THROW(order(StreamRef::legacy(), StreamRef::legacy(), Device::cuda(0)));
}

TEST(CudaOrder, RecordsOnAfterAndWaitsOnBefore) {
    FakeCuda fake;
    order(kS1, kS2, Device::cuda(0));
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5010 ctx0", "wait s5020 on e1"}));
    EXPECT_EQ(fake->current, nullptr);  // the caller's (absent) context is back
}

TEST(CudaOrder, ReusesPooledEvents) {
    FakeCuda fake;
    for (int i = 0; i < 5; ++i) order(kS1, kS2, Device::cuda(0));
    EXPECT_EQ(fake->events_created, 1);
    order(StreamRef::legacy(), StreamRef::per_thread(), Device::cuda(0));
    EXPECT_EQ(fake->events_created, 1);
    const Log log = fake->take_log();
    EXPECT_EQ(log.back(), "wait per_thread on e1");
    EXPECT_EQ(log[log.size() - 2], "record e1 on legacy ctx0");
}

TEST(CudaOrder, UsesTheDevicesContextAndRestoresTheCallers) {
    FakeCuda fake(2);
    fake->current = fake->context_of(0);
    order(StreamRef::legacy(), kS2, Device::cuda(1));  // the legacy stream of device 1's context
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on legacy ctx1", "wait s5020 on e1"}));
    EXPECT_EQ(fake->current, fake->context_of(0));
}

TEST(CudaOrder, FailedRecordReturnsTheEventToThePool) {
    FakeCuda fake;
    fake->fail_nth("cuEventRecord", 1, result::invalid_value);
    try {
        order(kS1, kS2, Device::cuda(0));
        FAIL();
    } catch (const DriverError& e) {
        EXPECT_EQ(std::string(e.what()), "cuEventRecord: CUDA_ERROR_INVALID_VALUE (invalid argument)");
    }
    order(kS1, kS2, Device::cuda(0));
    EXPECT_EQ(fake->events_created, 1);
    EXPECT_EQ(fake->current, nullptr);
}

TEST(CudaOrder, RejectsStreamZeroAndNonCudaDevices) {
    FakeCuda fake;
    for (auto [a, b] : {std::pair{StreamRef(0), kS1}, std::pair{kS1, StreamRef(0)}}) {
        try {
            order(a, b, Device::cuda(0));
            FAIL();
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::value);
            EXPECT_NE(std::string(e.what()).find("stream 0"), std::string::npos);
        }
    }
    EXPECT_THROW(order(kS1, kS2, Device::cpu()), Error);
    EXPECT_TRUE(fake->log.empty());
}

TEST(CudaStreamRef, EncodingIsTheHandle) {
    EXPECT_EQ(StreamRef::legacy().handle(), reinterpret_cast<CUstream>(1));
    EXPECT_EQ(StreamRef::per_thread().handle(), reinterpret_cast<CUstream>(2));
    EXPECT_EQ(kS1.handle(), reinterpret_cast<CUstream>(0x5010));
    EXPECT_EQ(StreamRef::from_handle(nullptr), StreamRef::legacy());  // the driver's NULL stream
    EXPECT_THROW((void)StreamRef::none().handle(), Error);
    EXPECT_THROW((void)StreamRef(0).handle(), Error);
}

TEST(CudaStream, OwnedStreamsAreDestroyedBorrowedAreNot) {
    FakeCuda fake;
    {
        Stream owned = Stream::create(0);
        Stream borrowed = Stream::borrow(kS2, 0);
        EXPECT_TRUE(owned.owning());
        EXPECT_FALSE(borrowed.owning());
        Stream moved = std::move(owned);
        EXPECT_FALSE(owned.owning());  // NOLINT(bugprone-use-after-move): the moved-from state is defined
        EXPECT_EQ(moved.ref(), StreamRef(0x5010));
    }
    EXPECT_EQ(fake->take_log(), (Log{"stream_create s5010 non_blocking", "stream_destroy s5010"}));
}

TEST(CudaEvent, RecordAndWait) {
    FakeCuda fake;
    {
        Event e(0);
        e.record(kS1);
        e.wait(kS2);
        e.synchronize();
    }
    EXPECT_EQ(fake->take_log(),
              (Log{"event_create e1", "record e1 on s5010 ctx0", "wait s5020 on e1", "event_sync e1"}));
    EXPECT_EQ(fake->events_destroyed, 1);
}

}  // namespace
