// VirtualBuffer bookkeeping against the fake driver: mapping plans, access batching, rollback,
// teardown order, views, sleep/wake. Chunks are 2 MiB (the fake's granularity) unless stated.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "expect_error.hpp"
#include "fake_driver.hpp"
#include "stridex/cuda/vmm.hpp"

namespace {

using namespace stridex_test;
using stridex::Device;
using stridex::Error;
using stridex::ErrorKind;
namespace dtypes = stridex::dtypes;
using Log = std::vector<std::string>;

VirtualBufferOptions chunks_of(std::size_t chunk, std::vector<int> devices = {0}) {
    VirtualBufferOptions o;
    o.chunk_size = chunk;
    o.devices = std::move(devices);
    return o;
}

using ::stridex::testing::expect_error;

TEST(VirtualBuffer, MapsChunksBehindEachOtherAndSetsAccessOnce) {
    FakeCuda fake;
    {
        VirtualBuffer buf(16 * MiB, 5 * MiB, chunks_of(2 * MiB));
        EXPECT_EQ(fake->take_log(),
                  (Log{"reserve 16M", "create dev0 2M -> h1", "map +0M 2M h1", "create dev0 2M -> h2", "map +2M 2M h2",
                       "create dev0 2M -> h3", "map +4M 2M h3", "access +0M 6M dev0"}));
        EXPECT_EQ(buf.size(), 5 * MiB);
        EXPECT_EQ(buf.num_chunks(), 3u);
        EXPECT_EQ(buf.mapped_bytes(), 6 * MiB);
        EXPECT_EQ(buf.capacity(), 16 * MiB);
        EXPECT_EQ(buf.chunk_size(), 2 * MiB);
        EXPECT_EQ(buf.granularity(), 2 * MiB);
        EXPECT_EQ(buf.base().device(), Device::cuda(0));
        EXPECT_EQ(buf.base().address() % (2 * MiB), 0u);
        EXPECT_EQ(fake->access_of(buf.base().address() + 4 * MiB), "dev0");
        EXPECT_EQ(fake->current, nullptr);  // no context left behind

        const DevicePtr base = buf.base();
        buf.grow(10 * MiB);  // only the new chunks, one access call for exactly them
        EXPECT_EQ(fake->take_log(), (Log{"create dev0 2M -> h4", "map +6M 2M h4", "create dev0 2M -> h5",
                                         "map +8M 2M h5", "access +6M 4M dev0"}));
        EXPECT_EQ(buf.base(), base);
        buf.grow(10 * MiB);   // same size: nothing
        buf.shrink(9 * MiB);  // same chunk count: nothing
        buf.grow(10 * MiB);
        EXPECT_TRUE(fake->take_log().empty());
        EXPECT_EQ(buf.size(), 10 * MiB);

        const VirtualBufferStats s = buf.stats();
        EXPECT_EQ(s.create.calls, 5u);
        EXPECT_EQ(s.map.calls, 5u);
        EXPECT_EQ(s.set_access.calls, 2u);
        EXPECT_EQ(s.reserve.calls, 1u);
        EXPECT_EQ(s.bytes_mapped, 10 * MiB);
        EXPECT_EQ(s.peak_bytes_mapped, 10 * MiB);
        EXPECT_EQ(s.bytes_copied, 0u);
    }
    EXPECT_EQ(fake->take_log(),
              (Log{"sync dev0", "unmap +8M 2M", "release h5", "unmap +6M 2M", "release h4", "unmap +4M 2M",
                   "release h3", "unmap +2M 2M", "release h2", "unmap +0M 2M", "release h1", "free 16M"}));
    fake->expect_clean();
}

TEST(VirtualBuffer, ChunkAndCapacityRounding) {
    FakeCuda fake;
    {
        VirtualBuffer a(10 * MiB, 0, chunks_of(3 * MiB));  // chunk up to the granularity, capacity to chunks
        EXPECT_EQ(a.chunk_size(), 4 * MiB);
        EXPECT_EQ(a.capacity(), 12 * MiB);
        VirtualBuffer b(std::size_t{1} << 30);  // default: capacity / 64
        EXPECT_EQ(b.chunk_size(), 16 * MiB);
        VirtualBuffer c(10 * MiB);  // default never below the granularity
        EXPECT_EQ(c.chunk_size(), 2 * MiB);
        VirtualBuffer d(1);
        EXPECT_EQ(d.capacity(), 2 * MiB);
        EXPECT_EQ(d.num_chunks(), 0u);
    }
    EXPECT_EQ(fake->take_log(), (Log{"reserve 12M", "reserve 1024M", "reserve 10M", "reserve 2M", "free 2M", "free 10M",
                                     "free 1024M", "free 12M"}));  // nothing mapped: no sync either
    fake->expect_clean();
}

TEST(VirtualBuffer, StripesChunksAcrossDevicesWithAccessForAll) {
    FakeCuda fake(3, 2 * MiB);
    {
        VirtualBuffer buf(7 * MiB, 7 * MiB, chunks_of(2 * MiB, {0, 2}));
        EXPECT_EQ(buf.capacity(), 8 * MiB);  // whole stripes: 2 devices x 2 MiB
        EXPECT_EQ(fake->take_log(), (Log{"reserve 8M", "create dev0 2M -> h1", "map +0M 2M h1", "create dev2 2M -> h2",
                                         "map +2M 2M h2", "create dev0 2M -> h3", "map +4M 2M h3",
                                         "create dev2 2M -> h4", "map +6M 2M h4", "access +0M 8M dev0,dev2"}));
        EXPECT_EQ(buf.device_of_chunk(3), 2);
        EXPECT_EQ(buf.devices(), (std::vector<int>{0, 2}));
        EXPECT_EQ(fake->access_of(buf.base().address() + 2 * MiB), "dev0,dev2");
    }
    const Log log = fake->take_log();
    EXPECT_EQ(log[0], "sync dev0");  // every device of the buffer finishes before the unmap
    EXPECT_EQ(log[1], "sync dev2");
    fake->expect_clean();
}

TEST(VirtualBuffer, StripingUsesTheLargestGranularity) {
    FakeCuda fake(2, 4 * MiB);
    VirtualBuffer buf(20 * MiB, 0, chunks_of(2 * MiB, {0, 1}));
    EXPECT_EQ(buf.chunk_size(), 4 * MiB);
    EXPECT_EQ(buf.capacity(), 24 * MiB);
}

TEST(VirtualBuffer, StripingNeedsPeerAccess) {
    FakeCuda fake(2);
    fake->no_peer = {{1, 0}};
    const Error e = expect_error([] { VirtualBuffer buf(8 * MiB, 0, chunks_of(2 * MiB, {0, 1})); }, ErrorKind::cuda);
    EXPECT_EQ(std::string(e.what()),
              "CUDA device 1 cannot access memory of device 0 (cuDeviceCanAccessPeer is 0): a striped VirtualBuffer "
              "needs peer access between all its devices");
    fake->expect_clean();
}

TEST(VirtualBuffer, RequiresVmmSupportAndValidDevices) {
    FakeCuda fake(2);
    fake->vmm_supported = {1, 0};
    EXPECT_NE(std::string(expect_error([] { VirtualBuffer b(MiB, 0, chunks_of(0, {1})); }, ErrorKind::cuda).what())
                  .find("CUDA device 1 does not support virtual memory management"),
              std::string::npos);
    expect_error([] { VirtualBuffer b(MiB, 0, chunks_of(0, {2})); }, ErrorKind::value);
    expect_error([] { VirtualBuffer b(MiB, 0, chunks_of(0, {0, 0})); }, ErrorKind::value);
    expect_error([] { VirtualBuffer b(MiB, 0, chunks_of(0, {})); }, ErrorKind::value);
    expect_error([] { VirtualBuffer b(0); }, ErrorKind::value);
    expect_error([] { VirtualBuffer b(MiB, 2 * MiB); }, ErrorKind::value);
    fake->expect_clean();
}

TEST(VirtualBuffer, FailedGrowRollsBackExactly) {
    FakeCuda fake;
    VirtualBuffer buf(32 * MiB, 2 * MiB, chunks_of(2 * MiB));
    fake->take_log();
    fake->fail_nth("cuMemCreate", 3, result::out_of_memory);  // the 3rd of the grow's 5 chunks
    try {
        buf.grow(12 * MiB);
        FAIL();
    } catch (const DriverError& e) {
        EXPECT_EQ(e.code(), result::out_of_memory);
        EXPECT_EQ(std::string(e.what()),
                  "VirtualBuffer.grow failed at chunk 3 of 5 (index 3, device 0, 2097152 bytes at base+0x600000): "
                  "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory); the buffer is unchanged");
    }
    EXPECT_EQ(fake->take_log(),
              (Log{"create dev0 2M -> h2", "map +2M 2M h2", "create dev0 2M -> h3", "map +4M 2M h3",
                   "cuMemCreate -> injected error 2", "unmap +4M 2M", "release h3", "unmap +2M 2M", "release h2"}));
    EXPECT_EQ(buf.size(), 2 * MiB);
    EXPECT_EQ(buf.num_chunks(), 1u);
    EXPECT_EQ(fake->live_allocations(), 1u);
    EXPECT_EQ(fake->live_mappings(), 1u);
    EXPECT_EQ(fake->current, nullptr);

    buf.grow(12 * MiB);  // the buffer still works
    EXPECT_EQ(buf.num_chunks(), 6u);
    EXPECT_EQ(fake->take_log().back(), "access +2M 10M dev0");
}

TEST(VirtualBuffer, FailedMapReleasesTheUnmappedHandle) {
    FakeCuda fake;
    VirtualBuffer buf(32 * MiB, 0, chunks_of(2 * MiB));
    fake->take_log();
    fake->fail_nth("cuMemMap", 2, result::out_of_memory);
    EXPECT_THROW(buf.grow(6 * MiB), DriverError);
    EXPECT_EQ(fake->take_log(), (Log{"create dev0 2M -> h1", "map +0M 2M h1", "create dev0 2M -> h2",
                                     "cuMemMap -> injected error 2", "release h2", "unmap +0M 2M", "release h1"}));
    EXPECT_EQ(buf.num_chunks(), 0u);
    EXPECT_EQ(fake->live_allocations(), 0u);
}

TEST(VirtualBuffer, FailedSetAccessUnmapsTheWholeGrow) {
    FakeCuda fake;
    VirtualBuffer buf(32 * MiB, 2 * MiB, chunks_of(2 * MiB));
    fake->take_log();
    fake->fail_nth("cuMemSetAccess", 1, result::invalid_value);
    try {
        buf.grow(6 * MiB);
        FAIL();
    } catch (const DriverError& e) {
        EXPECT_NE(std::string(e.what()).find("failed at access for 1 device(s) to 2 new chunk(s): cuMemSetAccess"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(fake->take_log(),
              (Log{"create dev0 2M -> h2", "map +2M 2M h2", "create dev0 2M -> h3", "map +4M 2M h3",
                   "cuMemSetAccess -> injected error 1", "unmap +4M 2M", "release h3", "unmap +2M 2M", "release h2"}));
    EXPECT_EQ(buf.size(), 2 * MiB);
    EXPECT_EQ(fake->live_mappings(), 1u);
}

TEST(VirtualBuffer, FailedConstructionFreesTheReservation) {
    FakeCuda fake;
    fake->fail_nth("cuMemCreate", 2, result::out_of_memory);
    EXPECT_THROW(VirtualBuffer(16 * MiB, 8 * MiB, chunks_of(2 * MiB)), DriverError);
    EXPECT_EQ(fake->take_log().back(), "free 16M");
    fake->expect_clean();
}

TEST(VirtualBuffer, SizeChecks) {
    FakeCuda fake;
    VirtualBuffer buf(8 * MiB, 4 * MiB, chunks_of(2 * MiB));
    expect_error([&] { buf.grow(9 * MiB); }, ErrorKind::value);
    expect_error([&] { buf.grow(3 * MiB); }, ErrorKind::value);
    expect_error([&] { buf.shrink(5 * MiB); }, ErrorKind::value);
    buf.resize(8 * MiB);
    EXPECT_EQ(buf.num_chunks(), 4u);
    buf.resize(1);
    EXPECT_EQ(buf.num_chunks(), 1u);
    EXPECT_EQ(buf.size(), 1u);
}

TEST(VirtualBuffer, ShrinkSynchronizesThenUnmapsFromTheEnd) {
    FakeCuda fake;
    VirtualBuffer buf(16 * MiB, 8 * MiB, chunks_of(2 * MiB));
    fake->take_log();
    buf.shrink(3 * MiB);
    EXPECT_EQ(fake->take_log(), (Log{"sync dev0", "unmap +6M 2M", "release h4", "unmap +4M 2M", "release h3"}));
    EXPECT_EQ(buf.size(), 3 * MiB);
    EXPECT_EQ(buf.mapped_bytes(), 4 * MiB);
    buf.shrink(0);
    EXPECT_EQ(buf.num_chunks(), 0u);
    EXPECT_EQ(buf.stats().bytes_mapped, 0u);
    EXPECT_EQ(buf.stats().peak_bytes_mapped, 8 * MiB);
}

TEST(VirtualBuffer, FailedUnmapKeepsTheBufferConsistent) {
    FakeCuda fake;
    {
        VirtualBuffer buf(16 * MiB, 8 * MiB, chunks_of(2 * MiB));
        fake->fail_nth("cuMemUnmap", 2, result::invalid_value);
        EXPECT_THROW(buf.shrink(0), DriverError);
        EXPECT_EQ(buf.num_chunks(), 3u);  // the last chunk went, the next one failed
        EXPECT_EQ(buf.size(), 6 * MiB);   // clamped to what is still mapped
        buf.shrink(0);
        EXPECT_EQ(buf.num_chunks(), 0u);
    }
    fake->expect_clean();
}

TEST(VirtualBuffer, ViewsCoverTheirBytesAndBlockReleasingThem) {
    FakeCuda fake;
    VirtualBuffer buf(16 * MiB, 8 * MiB, chunks_of(2 * MiB));
    const std::int64_t shape[] = {256, 1024};  // 1 MiB of float32
    std::optional<stridex::View> v = buf.view(dtypes::float32, shape, 2 * MiB);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v->data()), buf.base().address() + 2 * MiB);
    EXPECT_EQ(v->byte_offset(), 0);
    EXPECT_EQ(v->device(), Device::cuda(0));
    EXPECT_EQ(v->stream(), stridex::kNoStream);
    EXPECT_FALSE(v->readonly());
    EXPECT_EQ(v->nbytes(), static_cast<std::int64_t>(MiB));
    EXPECT_EQ(buf.live_views(), 1u);

    // The view ends at 3 MiB: shrinking to 3 MiB is fine, below is not; growing always is.
    const Error e = expect_error([&] { buf.shrink(3 * MiB - 1); }, ErrorKind::buffer);
    EXPECT_EQ(
        std::string(e.what()),
        "VirtualBuffer.shrink to 3145727 bytes: a live view reaches byte 3145728; drop the views (and arrays made "
        "from them) first");
    EXPECT_EQ(buf.size(), 8 * MiB);
    buf.shrink(3 * MiB);
    buf.grow(12 * MiB);
    expect_error([&] { buf.sleep(); }, ErrorKind::buffer);
    expect_error([&] { buf.close(); }, ErrorKind::buffer);

    stridex::View copy = *v;  // copies share the registration
    v.reset();
    EXPECT_EQ(buf.live_views(), 1u);
    copy = stridex::View();
    EXPECT_EQ(buf.live_views(), 0u);
    buf.shrink(0);
}

TEST(VirtualBuffer, ViewBoundsAndAlignment) {
    FakeCuda fake;
    VirtualBuffer buf(16 * MiB, 4 * MiB, chunks_of(2 * MiB));
    const std::int64_t too_big[] = {static_cast<std::int64_t>(MiB) + 1};  // float32: 4 MiB + 4 bytes
    expect_error([&] { (void)buf.view(dtypes::float32, too_big); }, ErrorKind::value);
    const std::int64_t one[] = {1};
    expect_error([&] { (void)buf.view(dtypes::float32, one, 2); }, ErrorKind::value);      // misaligned
    expect_error([&] { (void)buf.view(dtypes::float32, one, -4); }, ErrorKind::value);     // negative
    expect_error([&] { (void)buf.view(dtypes::uint8, one, 4 * MiB); }, ErrorKind::value);  // past the end
    const std::int64_t empty[] = {0};
    EXPECT_EQ(buf.view(dtypes::uint8, empty, 4 * MiB).size(), 0);  // empty at the very end is fine
    const std::int64_t last[] = {1};
    EXPECT_EQ(buf.view(dtypes::uint8, last, 4 * MiB - 1).size(), 1);
    EXPECT_EQ(buf.live_views(), 0u);  // temporaries: dropped already
}

TEST(VirtualBuffer, ViewsKeepTheMemoryAfterTheBufferIsGone) {
    FakeCuda fake;
    std::optional<stridex::View> v;
    {
        VirtualBuffer buf(4 * MiB, 4 * MiB, chunks_of(2 * MiB));
        const std::int64_t shape[] = {16};
        v = buf.view(dtypes::uint8, shape);
        fake->take_log();
    }
    EXPECT_TRUE(fake->take_log().empty());  // still mapped: the view owns it
    EXPECT_EQ(fake->live_mappings(), 2u);
    v.reset();  // the last owner tears down
    EXPECT_EQ(fake->take_log(),
              (Log{"sync dev0", "unmap +2M 2M", "release h2", "unmap +0M 2M", "release h1", "free 4M"}));
    fake->expect_clean();
}

TEST(VirtualBuffer, SleepWithoutContentsKeepsTheAddressRange) {
    FakeCuda fake;
    {
        VirtualBuffer buf(16 * MiB, 3 * MiB, chunks_of(2 * MiB));
        const DevicePtr base = buf.base();
        fake->take_log();
        buf.sleep();
        EXPECT_EQ(fake->take_log(), (Log{"sync dev0", "unmap +2M 2M", "release h2", "unmap +0M 2M", "release h1"}));
        EXPECT_TRUE(buf.sleeping());
        EXPECT_EQ(buf.num_chunks(), 0u);
        EXPECT_EQ(buf.size(), 3 * MiB);
        EXPECT_EQ(fake->live_reservations(), 1u);
        expect_error([&] { buf.grow(4 * MiB); }, ErrorKind::value);
        expect_error([&] { buf.sleep(); }, ErrorKind::value);
        const std::int64_t shape[] = {1};
        expect_error([&] { (void)buf.view(dtypes::uint8, shape); }, ErrorKind::value);

        buf.wake();
        EXPECT_EQ(fake->take_log(), (Log{"create dev0 2M -> h3", "map +0M 2M h3", "create dev0 2M -> h4",
                                         "map +2M 2M h4", "access +0M 4M dev0"}));
        EXPECT_EQ(buf.base(), base);
        EXPECT_FALSE(buf.sleeping());
        EXPECT_TRUE(buf.contents_lost());
        expect_error([&] { buf.wake(); }, ErrorKind::value);
        EXPECT_EQ(buf.stats().bytes_copied, 0u);
    }
    fake->expect_clean();
}

TEST(VirtualBuffer, SleepKeepingContentsCopiesOutAndBack) {
    FakeCuda fake;
    {
        VirtualBuffer buf(16 * MiB, 3 * MiB, chunks_of(2 * MiB));
        const CUdeviceptr base = buf.base().address();
        for (std::size_t i = 0; i < 3 * MiB; i += 4096) *fake->bytes_at(base + i) = std::byte(i / 4096);
        fake->take_log();

        buf.sleep(true);
        EXPECT_EQ(fake->take_log(), (Log{"sync dev0", "dtoh +0M 2M", "dtoh +2M 1M", "unmap +2M 2M", "release h2",
                                         "unmap +0M 2M", "release h1"}));
        buf.wake();
        EXPECT_EQ(fake->take_log(),
                  (Log{"create dev0 2M -> h3", "map +0M 2M h3", "create dev0 2M -> h4", "map +2M 2M h4",
                       "access +0M 4M dev0", "htod +0M 2M", "htod +2M 1M", "sync dev0"}));
        EXPECT_FALSE(buf.contents_lost());
        for (std::size_t i = 0; i < 3 * MiB; i += 4096) ASSERT_EQ(*fake->bytes_at(base + i), std::byte(i / 4096)) << i;
        EXPECT_EQ(buf.stats().bytes_copied, 6 * MiB);
        EXPECT_EQ(buf.stats().sleeps, 1u);
        EXPECT_EQ(buf.stats().wakes, 1u);
    }
    fake->expect_clean();
}

TEST(VirtualBuffer, FailedWakeStaysAsleepAndCanRetry) {
    FakeCuda fake;
    {
        VirtualBuffer buf(16 * MiB, 4 * MiB, chunks_of(2 * MiB));
        *fake->bytes_at(buf.base().address() + 3 * MiB) = std::byte{42};
        buf.sleep(true);
        fake->take_log();
        fake->fail_nth("cuMemCreate", 2, result::out_of_memory);
        try {
            buf.wake();
            FAIL();
        } catch (const DriverError& e) {
            EXPECT_EQ(std::string(e.what()).rfind("VirtualBuffer.wake failed at chunk 2 of 2", 0), 0u) << e.what();
        }
        EXPECT_EQ(fake->take_log(), (Log{"create dev0 2M -> h3", "map +0M 2M h3", "cuMemCreate -> injected error 2",
                                         "unmap +0M 2M", "release h3"}));
        EXPECT_TRUE(buf.sleeping());

        fake->fail_nth("cuMemcpyHtoD", 2, result::invalid_value);  // mapped, then the copy back fails
        EXPECT_THROW(buf.wake(), DriverError);
        EXPECT_TRUE(buf.sleeping());
        EXPECT_EQ(fake->live_mappings(), 0u);

        buf.wake();
        EXPECT_EQ(*fake->bytes_at(buf.base().address() + 3 * MiB), std::byte{42});
    }
    fake->expect_clean();
}

TEST(VirtualBuffer, SleepOfAStripedBufferCopiesEachChunkOnItsDevice) {
    FakeCuda fake(2);
    {
        VirtualBuffer buf(8 * MiB, 8 * MiB, chunks_of(2 * MiB, {0, 1}));
        fake->take_log();
        fake->ctx_log.clear();
        buf.sleep(true);
        const Log log = fake->take_log();
        EXPECT_EQ(Log(log.begin(), log.begin() + 6),
                  (Log{"sync dev0", "sync dev1", "dtoh +0M 2M", "dtoh +2M 2M", "dtoh +4M 2M", "dtoh +6M 2M"}));
        buf.wake();
    }
    fake->expect_clean();
}

TEST(VirtualBuffer, CloseAndMove) {
    FakeCuda fake;
    VirtualBuffer a(4 * MiB, 2 * MiB, chunks_of(2 * MiB));
    VirtualBuffer b = std::move(a);
    EXPECT_TRUE(a.closed());  // NOLINT(bugprone-use-after-move): defined moved-from state
    EXPECT_EQ(b.size(), 2 * MiB);
    EXPECT_EQ(std::string(expect_error([&] { (void)a.size(); }, ErrorKind::value).what()), "VirtualBuffer is closed");
    b.close();
    EXPECT_TRUE(b.closed());
    b.close();  // idempotent
    expect_error([&] { b.grow(1); }, ErrorKind::value);
    fake->expect_clean();
}

TEST(VirtualBuffer, RestoresTheCallersContext) {
    FakeCuda fake(2);
    fake->current = fake->context_of(1);
    {
        VirtualBuffer buf(8 * MiB, 4 * MiB, chunks_of(2 * MiB));
        EXPECT_EQ(fake->current, fake->context_of(1));
        buf.shrink(0);
        buf.grow(4 * MiB);
        buf.sleep();
        buf.wake();
        EXPECT_EQ(fake->current, fake->context_of(1));
    }
    EXPECT_EQ(fake->current, fake->context_of(1));
    fake->expect_clean();
}

TEST(VirtualBuffer, TeardownAfterDriverShutdownIsSilent) {
    FakeCuda fake;
    {
        VirtualBuffer buf(4 * MiB, 4 * MiB, chunks_of(2 * MiB));
        fake->take_log();
        fake->fail_nth("cuCtxSynchronize", 1, result::deinitialized);  // the driver is gone (exit)
    }
    EXPECT_EQ(fake->take_log(), (Log{"cuCtxSynchronize -> injected error 4"}));  // nothing else attempted
}

}  // namespace
