// Pool bookkeeping against the fake driver (memory.hpp, docs/memory.md): which stream allocates
// and frees, the event order of a release after use on other streams, reuse of the same block,
// graph allocations, out of memory, invalid streams, the pinned pool, forked children, and the
// Allocator interface.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <limits>

#include "expect_error.hpp"
#include "fake_driver.hpp"
#include "stridex/cuda/array.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/memory.hpp"

namespace {

using namespace stridex_test;
using stridex::Allocation;
using stridex::Device;
using stridex::ErrorKind;
using stridex::testing::expect_error;
namespace dtypes = stridex::dtypes;
using Log = std::vector<std::string>;

CUstream stream_at(std::uintptr_t v) { return reinterpret_cast<CUstream>(v); }
const CUstream kLegacy = stream_at(1);
const CUstream kSide = stream_at(0x5010);
const CUstream kOther = stream_at(0x5020);

Allocation device_bytes(std::size_t n, std::intptr_t stream = 1) {
    return stridex::pool_allocator().allocate(n, Device::cuda(0), stream);
}

TEST(DevicePool, AllocatesOnTheWritingStreamAndFreesThereWithoutSynchronizing) {
    FakeCuda fake;
    {
        Allocation a = device_bytes(4 * MiB, 0x5010);
        EXPECT_EQ(fake->take_log(), (Log{"pool_create dev0 fd", "alloc_pool 4M on s5010 -> p5e0000000000"}));
        EXPECT_EQ(fake->pool_threshold(), std::numeric_limits<std::uint64_t>::max());  // freed memory stays cached
        const auto s = stridex::cuda::device_pool_stats(0);
        EXPECT_TRUE(s.created && s.shareable);
        EXPECT_EQ(s.in_use, 4 * MiB);
        EXPECT_EQ(s.allocations, 1u);
        EXPECT_EQ(s.reserved, 4 * MiB);
    }
    // No cuCtxSynchronize, no stream or event synchronization: only the stream-ordered free.
    EXPECT_EQ(fake->take_log(), (Log{"free_async p5e0000000000 on s5010"}));
    const auto s = stridex::cuda::device_pool_stats(0);
    EXPECT_EQ(s.in_use, 0u);
    EXPECT_EQ(s.peak_in_use, 4 * MiB);
    EXPECT_EQ(s.allocations, 0u);
    EXPECT_EQ(s.reserved, 4 * MiB);  // cached for reuse
    fake->expect_clean();
}

TEST(DevicePool, TheSameBlockComesBackOnReuseAndEmptyCacheReturnsIt) {
    FakeCuda fake;
    void* first = device_bytes(MiB).data;
    void* second = device_bytes(MiB).data;
    EXPECT_EQ(first, second);
    (void)fake->take_log();
    stridex::cuda::trim_device_pool(0);
    EXPECT_EQ(fake->take_log(), (Log{"pool_trim 1 blocks"}));
    EXPECT_EQ(stridex::cuda::device_pool_stats(0).reserved, 0u);
}

TEST(DevicePool, AReleaseWaitsForEveryOtherStreamThatUsedTheMemory) {
    FakeCuda fake;
    {
        Allocation a = device_bytes(MiB, 0x5010);
        const stridex::cuda::ContextGuard guard(0);
        stridex::cuda::note_use(a.owner, kOther, 0);
        stridex::cuda::note_use(a.owner, kOther, 0);  // once per stream
        stridex::cuda::note_use(a.owner, kSide, 0);   // its own stream: nothing to order
        (void)fake->take_log();
    }
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5020 ctx0", "wait s5010 on e1",
                                     "free_async p5e0000000000 on s5010"}));
    fake->expect_clean();
}

TEST(DevicePool, AStreamIsKeptAliveUntilTheReleaseRecordedItsEvent) {
    FakeCuda fake;
    bool dropped = false;
    {
        Allocation a = device_bytes(MiB, 0x5010);
        stridex::Owner stream_object = stridex::Owner::from_action([&dropped]() noexcept { dropped = true; });
        const stridex::cuda::ContextGuard guard(0);
        stridex::cuda::note_use(a.owner, kOther, 0, stream_object);
        stridex::cuda::note_use(a.owner, kOther, 0);  // once per stream: the object stays
        stream_object.reset();
        EXPECT_FALSE(dropped);  // the block holds the stream's object
        (void)fake->take_log();
    }
    EXPECT_TRUE(dropped);
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5020 ctx0", "wait s5010 on e1",
                                     "free_async p5e0000000000 on s5010"}));
    fake->expect_clean();
}

TEST(DevicePool, TheCopyEngineNotesTheStreamsItUsesPoolMemoryOn) {
    FakeCuda fake;
    {
        stridex::View a = stridex::allocate(std::vector<std::int64_t>{256}, dtypes::float32, Device::cuda(0),
                                            stridex::Order::C, false, 0x5010);
        stridex::View b = stridex::allocate(std::vector<std::int64_t>{256}, dtypes::float32, Device::cuda(0),
                                            stridex::Order::C, false, 0x5010);
        (void)stridex::copy(b, a, 0x5020);
        (void)fake->take_log();
    }
    const Log log = fake->take_log();
    EXPECT_EQ(std::count(log.begin(), log.end(), "wait s5010 on e1"), 2) << ::testing::PrintToString(log);
    EXPECT_EQ(log.back(), "free_async p5e0000000000 on s5010");
}

TEST(DevicePool, WithoutShareableHandlesThePoolIsPrivateAndSaysWhy) {
    FakeCuda fake;
    fake->pool_fd_supported = false;
    Allocation a = device_bytes(MiB);
    EXPECT_EQ(fake->take_log(), (Log{"pool_create dev0 none", "alloc_pool 1M on legacy -> p5e0000000000"}));
    const auto s = stridex::cuda::device_pool_stats(0);
    EXPECT_FALSE(s.shareable);
    EXPECT_NE(s.not_shareable.find("POSIX file descriptor"), std::string::npos) << s.not_shareable;
    EXPECT_FALSE(stridex::cuda::pool_memory_of(a.owner)->shareable);
}

TEST(DevicePool, OutOfMemoryNamesDeviceBytesAndPoolThenThePoolStaysUsable) {
    FakeCuda fake;
    fake->device_capacity = 8 * MiB;
    { Allocation cached = device_bytes(4 * MiB); }  // 4 MiB cached in the pool
    Allocation held = device_bytes(2 * MiB);        // 6 MiB reserved
    (void)fake->take_log();
    // 4 MiB fits only once the cache is returned: trimmed and retried.
    Allocation fits = device_bytes(3 * MiB);
    EXPECT_EQ(fake->take_log(), (Log{"alloc_pool 3M on legacy -> out of memory", "pool_trim 1 blocks",
                                     "alloc_pool 3M on legacy -> p5e0000600000"}));
    const auto e = expect_error([] { (void)device_bytes(64 * MiB); }, ErrorKind::memory,
                                "cuda:0: out of memory allocating 67108864 bytes");
    EXPECT_NE(std::string(e.what()).find("pool holds 5242880 bytes, 5242880 in use"), std::string::npos) << e.what();
    EXPECT_EQ(fake->live_pool_blocks(), 2u);  // nothing leaked by the failure
    Allocation after = device_bytes(MiB);     // and the pool still serves
    EXPECT_NE(after.data, nullptr);
}

TEST(DevicePool, AnInvalidStreamIsAClearError) {
    FakeCuda fake;
    fake->invalid_streams = {kOther};
    expect_error([] { (void)device_bytes(MiB, 0x5020); }, ErrorKind::value,
                 "cannot allocate on stream 0x5020: the stream is invalid or destroyed");
    EXPECT_EQ(stridex::cuda::device_pool_stats(0).allocations, 0u);
}

TEST(DevicePool, AFreeOnADestroyedStreamFallsBackToTheSynchronousFree) {
    FakeCuda fake;
    {
        Allocation a = device_bytes(MiB, 0x5010);
        fake->invalid_streams = {kSide};  // its owner destroyed the stream meanwhile
        (void)fake->take_log();
    }
    EXPECT_EQ(fake->take_log(), (Log{"free p5e0000000000 (synchronous)"}));
    fake->expect_clean();
}

// A capture's allocations (pool_device.cpp, "memory a CUDA graph owns"): no memory-allocation node, so
// that a graph instantiated without auto-free-on-launch launches again; the graph keeps them.
const CUstream kCapturing = stream_at(0x6010);
constexpr unsigned long long kCaptureId = 7;

bool logged(const Log& log, const std::string& line) { return std::find(log.begin(), log.end(), line) != log.end(); }

TEST(DevicePool, ACaptureAllocatesPoolMemoryOutsideTheGraphThatTheGraphWaitsFor) {
    FakeCuda fake;
    fake->begin_capture(kCapturing, kCaptureId);
    Allocation a = device_bytes(MiB, 0x6010);
    const Log log = fake->take_log();
    // stridex's private stream (the first stream the fake makes, s5010) allocates from the pool...
    EXPECT_TRUE(logged(log, "stream_create s5010 non_blocking")) << ::testing::PrintToString(log);
    EXPECT_TRUE(logged(log, "alloc_pool 1M on s5010 -> p5e0000000000")) << ::testing::PrintToString(log);
    // ...and the graph waits for that allocation as an external event; no graph allocation node.
    EXPECT_TRUE(logged(log, "wait s6010 on e1 external")) << ::testing::PrintToString(log);
    for (const std::string& line : log) EXPECT_EQ(line.find("alloc_graph"), std::string::npos) << line;
    EXPECT_EQ(stridex::cuda::device_pool_stats(0).in_use, MiB);  // the pool's memory, counted
    fake->end_capture(kCapturing);
    a.owner.reset();
    EXPECT_EQ(fake->take_log(), Log{});  // kept past the capture: the graph's until it is destroyed
    fake->destroy_graph(kCaptureId);
    stridex::cuda::drain_graph_releases();
    const Log freed = fake->take_log();
    EXPECT_TRUE(logged(freed, "free_async p5e0000000000 on s5010")) << ::testing::PrintToString(freed);
    EXPECT_EQ(stridex::cuda::device_pool_stats(0).in_use, 0u);
    fake->expect_clean();
}

TEST(DevicePool, AResultKeptPastItsGraphIsFreedWithItsLastView) {
    FakeCuda fake;
    fake->begin_capture(kCapturing, kCaptureId);
    Allocation a = device_bytes(MiB, 0x6010);
    fake->end_capture(kCapturing);
    fake->destroy_graph(kCaptureId);
    stridex::cuda::drain_graph_releases();
    (void)fake->take_log();
    EXPECT_EQ(stridex::cuda::device_pool_stats(0).in_use, MiB);  // the View still has it
    a.owner.reset();
    EXPECT_EQ(fake->take_log(), (Log{"free_async p5e0000000000 on s5010"}));
    fake->expect_clean();
}

TEST(DevicePool, ATemporaryDroppedInsideTheCaptureIsReusedOnItsStream) {
    FakeCuda fake;
    fake->begin_capture(kCapturing, kCaptureId);
    void* first = device_bytes(MiB, 0x6010).data;  // dropped at once, inside the capture
    (void)fake->take_log();
    Allocation again = device_bytes(MiB / 2, 0x6010);
    EXPECT_EQ(again.data, first);  // the same block, and nothing asked of the driver
    EXPECT_EQ(fake->take_log(), Log{});
    Allocation larger = device_bytes(4 * MiB, 0x6010);  // more than it holds: a new block
    EXPECT_NE(larger.data, first);
    fake->end_capture(kCapturing);
    again.owner.reset();
    larger.owner.reset();
    fake->destroy_graph(kCaptureId);
    stridex::cuda::drain_graph_releases();
    const Log log = fake->take_log();
    EXPECT_EQ(std::count_if(log.begin(), log.end(), [](const std::string& l) { return l.starts_with("free_async"); }),
              2)
        << ::testing::PrintToString(log);
    EXPECT_EQ(stridex::cuda::device_pool_stats(0).in_use, 0u);
    fake->expect_clean();
}

TEST(DevicePool, ABlockAnotherStreamUsedIsNotReusedInTheCapture) {
    FakeCuda fake;
    fake->begin_capture(kCapturing, kCaptureId);
    void* first = nullptr;
    {
        Allocation a = device_bytes(MiB, 0x6010);
        first = a.data;
        const stridex::cuda::ContextGuard guard(0);
        stridex::cuda::note_use(a.owner, kOther, 0);  // read on a stream outside the capture
    }
    Allocation b = device_bytes(MiB, 0x6010);
    EXPECT_NE(b.data, first);
    fake->end_capture(kCapturing);
    b.owner.reset();
    fake->destroy_graph(kCaptureId);
    stridex::cuda::drain_graph_releases();
    const Log log = fake->take_log();
    // The first block's free waits for that stream; the capture's own stream gets no event.
    EXPECT_TRUE(logged(log, "record e3 on s5020 ctx0")) << ::testing::PrintToString(log);
    for (const std::string& line : log) EXPECT_EQ(line.find("on s6010"), std::string::npos) << line;
    fake->expect_clean();
}

TEST(DevicePool, MemoryIsFoundByAddressWhateverOwnerHoldsIt) {
    FakeCuda fake;
    {
        Allocation a = device_bytes(MiB, 0x5010);
        const stridex::cuda::ContextGuard guard(0);
        // A torch tensor made from a View of it keeps it alive through torch's own owner.
        stridex::cuda::note_use_at(static_cast<char*>(a.data) + 4096, kOther, 0);
        stridex::cuda::note_use_at(static_cast<char*>(a.data) + MiB, kSide, 0);  // past its end: not it
        (void)fake->take_log();
    }
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5020 ctx0", "wait s5010 on e1",
                                     "free_async p5e0000000000 on s5010"}));
    fake->expect_clean();
}

TEST(DevicePool, AForkedChildNeverFreesTheParentsBlocks) {
    FakeCuda fake;
    Allocation a = device_bytes(MiB);
    (void)fake->take_log();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        a.owner.reset();
        ::_exit(fake->log.empty() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    a.owner.reset();
    EXPECT_EQ(fake->take_log(), (Log{"free_async p5e0000000000 on legacy"}));
}

TEST(PinnedPool, ReusesABlockOnlyAfterTheStreamsThatUsedItCompleted) {
    FakeCuda fake;
    void* first = nullptr;
    {
        Allocation a = stridex::pool_allocator().allocate(3000, Device::cuda_host(), 1);
        first = a.data;
        EXPECT_EQ(fake->take_log(), (Log{"host_alloc 4096"}));
        const stridex::cuda::ContextGuard guard(0);
        stridex::cuda::note_use(a.owner, kSide, 0);
        (void)fake->take_log();
    }
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5010 ctx0"}));
    fake->busy_events = {reinterpret_cast<CUevent>(std::uintptr_t{0x9001})};
    Allocation busy = stridex::pool_allocator().allocate(4000, Device::cuda_host(), 1);
    EXPECT_NE(busy.data, first);  // the stream still reads the first block
    fake->busy_events.clear();
    Allocation again = stridex::pool_allocator().allocate(4096, Device::cuda_host(), 1);
    EXPECT_EQ(again.data, first);
    const auto s = stridex::cuda::pinned_pool_stats();
    EXPECT_EQ(s.in_use, 8192u);
    EXPECT_EQ(s.reserved, 8192u);
    busy.owner.reset();
    again.owner.reset();
    stridex::cuda::trim_host_pools();
    EXPECT_EQ(fake->live_pinned(), 0u);
    EXPECT_EQ(stridex::cuda::pinned_pool_stats().reserved, 0u);
}

TEST(PinnedPool, OutOfPinnedMemoryIsAMemoryError) {
    FakeCuda fake;
    fake->pinned_capacity = 0;
    expect_error([] { (void)stridex::Array::pinned({1024}, dtypes::float32); }, ErrorKind::memory,
                 "cuda_host: out of pinned memory allocating 4096 bytes");
    EXPECT_EQ(fake->live_pinned(), 0u);
}

// A caller's allocator: counts its calls, hands out host memory of its own.
class CountingAllocator final : public stridex::Allocator {
public:
    mutable std::vector<std::string> calls;
    mutable int freed = 0;
    Allocation allocate(std::size_t bytes, Device device, std::intptr_t stream) const override {
        calls.push_back(std::to_string(bytes) + " " + device.name() + " " + std::to_string(stream));
        auto* block = new std::vector<std::byte>(bytes);
        struct Context {
            std::vector<std::byte>* block;
            int* freed;
        };
        auto* c = new Context{block, &freed};
        return {block->data(), stridex::Owner::from_callback(
                                   [](void* p) noexcept {
                                       auto* ctx = static_cast<Context*>(p);
                                       ++*ctx->freed;
                                       delete ctx->block;
                                       delete ctx;
                                   },
                                   c)};
    }
};

TEST(Allocator, EveryAllocatingCallTakesTheCallersAllocator) {
    CountingAllocator mine;
    {
        const std::int64_t shape[] = {3, 4};
        stridex::View v = stridex::allocate(shape, dtypes::float32, Device::cpu(), stridex::Order::F, false,
                                            stridex::kDefaultStream, &mine);
        EXPECT_EQ(v.strides()[0], 1);
        stridex::Array a = stridex::Array::allocate(shape, dtypes::int64, Device::cpu(), mine, 7);
        EXPECT_EQ(a.nbytes(), 96);
        stridex::View c = stridex::copy_to(a, Device::cpu(), stridex::Order::C, stridex::kNoStream, &mine);
        EXPECT_EQ(mine.calls, (std::vector<std::string>{"48 cpu 1", "96 cpu 7", "96 cpu -1"}));
        EXPECT_EQ(mine.freed, 0);
    }
    EXPECT_EQ(mine.freed, 3);
}

}  // namespace
