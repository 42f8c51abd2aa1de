// CUDA interprocess sharing against the fake driver, which plays both processes: what an export
// records and hands out, how an import opens, orders and closes, and every refusal.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "expect_error.hpp"
#include "fake_driver.hpp"
#include "stridex/cuda/ipc.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/cuda/vmm.hpp"

namespace {

using namespace stridex_test;
using stridex::Device;
using stridex::ErrorKind;
using stridex::Layout;
using stridex::Owner;
using stridex::View;
namespace dtypes = stridex::dtypes;
namespace ipc = stridex::cuda::ipc;
using ::stridex::testing::expect_error;

constexpr CUdeviceptr kBase = 0x500000000;
constexpr std::size_t kAllocation = 1 * MiB;

bool logged(const std::vector<std::string>& log, const std::string& prefix) {
    for (const auto& line : log)
        if (line.rfind(prefix, 0) == 0) return true;
    return false;
}

// A View of 16 floats at kBase + offset, as torch's allocator would hand out (device memory known
// to the driver as one allocation of kAllocation bytes).
View device_view(FakeCuda& fake, std::uint64_t offset, int ordinal = 0, std::intptr_t stream = stridex::kNoStream) {
    fake->add_pointer_range(kBase, kAllocation, cu::kMemoryTypeDevice, false, ordinal);
    const std::int64_t shape[] = {16};
    View v(reinterpret_cast<void*>(kBase + offset), 0, Layout::contiguous(shape), dtypes::float32,
           Device::cuda(ordinal), false, Owner());
    v.set_stream(stream);
    return v;
}

ipc::Shape shape_of(const View& v) {
    return {{v.shape().begin(), v.shape().end()}, {v.strides().begin(), v.strides().end()}, v.dtype(), v.readonly()};
}

TEST(CudaIpc, ExportNamesTheAllocationAndRecordsAnInterprocessEventOnTheLegacyStream) {
    FakeCuda fake;
    const View v = device_view(fake, 4096);
    {
        const ipc::Export e = ipc::Export::of(v);
        EXPECT_EQ(e.kind(), ipc::MemoryKind::ipc_handle);
        EXPECT_EQ(e.offset(), 4096u);
        EXPECT_EQ(e.extent(), kAllocation);
        EXPECT_EQ(e.device(), ipc::device_uuid(0));
        ASSERT_TRUE(e.event().has_value());
        const auto log = fake->take_log();
        EXPECT_TRUE(logged(log, "ipc_get_mem_handle 0x500000000"));
        EXPECT_TRUE(logged(log, "event_create e1 interprocess"));
        EXPECT_TRUE(logged(log, "record e1 on legacy"));  // the View said no stream
    }
    EXPECT_EQ(fake->events_destroyed, 1);  // the exporter's event dies with its export
}

TEST(CudaIpc, ExportRecordsOnTheViewsStream) {
    FakeCuda fake;
    const View v = device_view(fake, 0, 0, 0x5010);
    const ipc::Export e = ipc::Export::of(v);
    EXPECT_TRUE(logged(fake->take_log(), "record e1 on s5010"));
}

TEST(CudaIpc, ImportOpensAHandleOnceWaitsOnTheEventAndClosesAfterTheLastView) {
    FakeCuda fake;
    const View src = device_view(fake, 256);
    const ipc::Export e = ipc::Export::of(src);
    fake->take_log();
    std::optional<View> a = ipc::import_handle(e.handle(), e.device(), e.offset(), e.extent(), shape_of(src), e.event(),
                                               Owner());
    std::optional<View> b = ipc::import_handle(e.handle(), e.device(), e.offset(), e.extent(), shape_of(src),
                                               std::nullopt, Owner());
    const auto log = fake->take_log();
    EXPECT_TRUE(logged(log, "ipc_open 0x500000000 ctx0"));
    EXPECT_TRUE(logged(log, "ipc_open_event e1 -> e2"));  // opened, carried by the View, waited for by nobody yet
    EXPECT_FALSE(logged(log, "wait "));
    EXPECT_EQ(fake->open_ipc_handles(), 1u);  // opened once for both Views
    EXPECT_EQ(ipc::open_handles(), 1u);
    EXPECT_EQ(reinterpret_cast<CUdeviceptr>(a->ptr()), kBase + 0x100000000000 + 256);
    EXPECT_EQ(a->device(), Device::cuda(0));
    EXPECT_EQ(a->stream(), stridex::kNoStream);  // ready after the event: its Pending, not a stream
    ASSERT_NE(a->pending(), nullptr);
    EXPECT_FALSE(a->pending()->waited());
    EXPECT_EQ(b->stream(), stridex::kNoStream);
    EXPECT_EQ(b->pending(), nullptr);
    a.reset();
    EXPECT_EQ(fake->open_ipc_handles(), 1u);
    b.reset();
    EXPECT_EQ(fake->open_ipc_handles(), 0u);
    EXPECT_EQ(ipc::open_handles(), 0u);
    EXPECT_TRUE(logged(fake->take_log(), "ipc_close 0x500000000"));
}

TEST(CudaIpc, ANegativeStrideViewWithAByteOffsetArrivesAtItsElementZero) {
    FakeCuda fake;
    fake->add_pointer_range(kBase, kAllocation, cu::kMemoryTypeDevice, false, 0);
    const std::int64_t shape[] = {16}, strides[] = {-1};
    const View src(reinterpret_cast<void*>(kBase), 60, Layout(shape, strides), dtypes::float32, Device::cuda(0), false,
                   Owner());
    const ipc::Export e = ipc::Export::of(src);
    EXPECT_EQ(e.offset(), 60u);  // element 0; the elements reach down to the base
    const View v = ipc::import_handle(e.handle(), e.device(), e.offset(), e.extent(), shape_of(src), std::nullopt,
                                      Owner());
    EXPECT_EQ(reinterpret_cast<CUdeviceptr>(v.ptr()), kBase + 0x100000000000 + 60);
    EXPECT_EQ(v.byte_offset(), 0);  // torch ignores DLPack's byte_offset: the address itself is right
    EXPECT_EQ(v.strides()[0], -1);
}

TEST(CudaIpc, ImportKeepsTheCallersOwnerUntilTheViewGoes) {
    FakeCuda fake;
    const View src = device_view(fake, 0);
    const ipc::Export e = ipc::Export::of(src);
    int released = 0;
    Owner keep = Owner::from_callback([](void* n) noexcept { ++*static_cast<int*>(n); }, &released);
    {
        View v = ipc::import_handle(e.handle(), e.device(), 0, e.extent(), shape_of(src), std::nullopt, keep);
        keep.reset();
        EXPECT_EQ(released, 0);
    }
    EXPECT_EQ(released, 1);
}

TEST(CudaIpc, DevicesAreMatchedByUuidNotOrdinal) {
    FakeCuda fake(2);
    const View src = device_view(fake, 0, 0);
    const ipc::Export e = ipc::Export::of(src);
    fake->uuid_of_ordinal = {1, 0};  // the importing process numbers the two GPUs the other way round
    View v = ipc::import_handle(e.handle(), e.device(), 0, e.extent(), shape_of(src), std::nullopt, Owner());
    EXPECT_EQ(v.device(), Device::cuda(1));
    EXPECT_TRUE(logged(fake->take_log(), "ipc_open 0x500000000 ctx1"));
}

TEST(CudaIpc, AGpuNotVisibleHereIsAValueError) {
    FakeCuda fake;
    const View src = device_view(fake, 0);
    const ipc::Export e = ipc::Export::of(src);
    fake->uuid_of_ordinal = {7};
    expect_error(
        [&] { ipc::import_handle(e.handle(), e.device(), 0, e.extent(), shape_of(src), std::nullopt, Owner()); },
        ErrorKind::value, "is not visible in this process");
    EXPECT_EQ(fake->open_ipc_handles(), 0u);
}

TEST(CudaIpc, ALayoutOutsideTheSharedBytesIsRefusedBeforeAnythingOpens) {
    FakeCuda fake;
    const View src = device_view(fake, 0);
    const ipc::Export e = ipc::Export::of(src);
    expect_error(
        [&] {
            ipc::import_handle(e.handle(), e.device(), kAllocation - 32, e.extent(), shape_of(src), std::nullopt,
                               Owner());
        },
        ErrorKind::value, "IPC handle describes bytes");
    ipc::Shape negative = shape_of(src);
    negative.strides = {-1};
    expect_error([&] { ipc::import_handle(e.handle(), e.device(), 0, e.extent(), negative, std::nullopt, Owner()); },
                 ErrorKind::value, "IPC handle describes bytes");
    expect_error(
        [&] {
            ipc::import_handle(e.handle(), e.device(), INT64_MAX, UINT64_MAX, shape_of(src), std::nullopt, Owner());
        },
        ErrorKind::value, "IPC handle describes bytes");
    expect_error(
        [&] {
            ipc::import_handle(e.handle(), e.device(), UINT64_MAX, UINT64_MAX, shape_of(src), std::nullopt, Owner());
        },
        ErrorKind::value, "IPC handle describes bytes");
    EXPECT_EQ(fake->open_ipc_handles(), 0u);
}

TEST(CudaIpc, UnshareableMemoryNamesWhy) {
    FakeCuda fake;
    const std::int64_t shape[] = {4};
    float host[4] = {};
    const View cpu(host, 0, Layout::contiguous(shape), dtypes::float32, Device::cpu(), false, Owner());
    expect_error([&] { ipc::Export::of(cpu); }, ErrorKind::unsupported, "only CUDA device memory");
    const View unknown(reinterpret_cast<void*>(0x900000000), 0, Layout::contiguous(shape), dtypes::float32,
                       Device::cuda(0), false, Owner());
    expect_error([&] { ipc::Export::of(unknown); }, ErrorKind::unsupported, "does not know");
    const View src = device_view(fake, 0);
    fake->fail_nth("cuIpcGetMemHandle", 1, result::invalid_value);
    expect_error([&] { ipc::Export::of(src); }, ErrorKind::unsupported, "cuIpcGetMemHandle");
    EXPECT_EQ(fake->events_created, 0);  // refused before any event
}

TEST(CudaIpc, AFailedEventLeavesNothingBehind) {
    FakeCuda fake;
    const View src = device_view(fake, 0);
    fake->fail_nth("cuEventRecord", 1, result::invalid_value);
    expect_error([&] { ipc::Export::of(src); }, ErrorKind::cuda, "cuEventRecord");
    EXPECT_EQ(fake->events_created, fake->events_destroyed);
}

TEST(CudaIpc, VmmChunksTravelAsFdsAndMapInOrderAtAFreshReservation) {
    FakeCuda fake;
    {
        VirtualBufferOptions o;
        o.chunk_size = 2 * MiB;
        o.shareable = true;
        VirtualBuffer buf(8 * MiB, 6 * MiB, o);
        const std::int64_t shape[] = {static_cast<std::int64_t>(MiB)};  // 4 MiB of floats from 1 MiB in
        const View src = buf.view(dtypes::float32, shape, static_cast<std::int64_t>(MiB));
        fake->take_log();
        {
            const ipc::Export e = ipc::Export::of(src);
            EXPECT_EQ(e.kind(), ipc::MemoryKind::vmm_fds);
            ASSERT_EQ(e.fds().size(), 3u);  // chunks 0..2 hold bytes [1, 5) MiB
            EXPECT_EQ(e.chunk_size(), 2 * MiB);
            EXPECT_EQ(e.offset(), MiB);
            std::optional<View> v = ipc::import_fds(e.fds(), e.chunk_size(), e.device(), e.offset(), shape_of(src),
                                                    e.event(), Owner());
            const auto log = fake->take_log();
            EXPECT_TRUE(logged(log, "reserve 6M"));
            EXPECT_TRUE(logged(log, "access +0M 6M dev0"));
            // The exporter's event may go with the ticket right after: a private stream waits for
            // it now and records an event of this process's, which the View carries; no stream of
            // the caller's (not the legacy default stream) waits at import.
            EXPECT_TRUE(logged(log, "wait s"));
            EXPECT_TRUE(logged(log, "record e"));
            EXPECT_FALSE(logged(log, "wait legacy"));
            EXPECT_EQ(v->stream(), stridex::kNoStream);
            ASSERT_NE(v->pending(), nullptr);
            EXPECT_FALSE(v->pending()->waited());
            EXPECT_EQ(v->device(), Device::cuda(0));
            stridex::cuda::order(*v, stridex::cuda::StreamRef::legacy());  // the consumer's door, at the point of use
            EXPECT_TRUE(logged(fake->take_log(), "wait legacy on e"));
            EXPECT_TRUE(v->pending()->waited_by(stridex::cuda::StreamRef::kLegacy, Device::cuda(0)));
            // Same physical memory: a byte written through the exporter's address reads through ours.
            fake->bytes_at(reinterpret_cast<CUdeviceptr>(src.ptr()))[0] = std::byte{42};
            EXPECT_EQ(fake->bytes_at(reinterpret_cast<CUdeviceptr>(v->ptr()))[0], std::byte{42});
            v.reset();
            const auto teardown = fake->take_log();
            EXPECT_TRUE(logged(teardown, "sync dev0"));  // unmapping is not stream-ordered
            EXPECT_TRUE(logged(teardown, "free 6M"));
        }
    }
    fake->expect_clean();
}

TEST(CudaIpc, VmmMemoryOfABufferThatIsNotShareableIsRefused) {
    FakeCuda fake;
    VirtualBuffer buf(4 * MiB, 4 * MiB);
    const std::int64_t shape[] = {16};
    const View v = buf.view(dtypes::uint8, shape);
    expect_error([&] { ipc::Export::of(v); }, ErrorKind::unsupported, "cannot share");
}

TEST(CudaIpc, AFailedChunkImportUnmapsAndFreesWhatItMapped) {
    FakeCuda fake;
    {
        VirtualBufferOptions o;
        o.chunk_size = 2 * MiB;
        o.shareable = true;
        VirtualBuffer buf(4 * MiB, 4 * MiB, o);
        const std::int64_t shape[] = {static_cast<std::int64_t>(MiB)};
        const View src = buf.view(dtypes::float32, shape);
        const ipc::Export e = ipc::Export::of(src);
        fake->fail_nth("cuMemImportFromShareableHandle", 2, result::invalid_value);
        expect_error(
            [&] {
                ipc::import_fds(e.fds(), e.chunk_size(), e.device(), e.offset(), shape_of(src), std::nullopt, Owner());
            },
            ErrorKind::cuda, "cuMemImportFromShareableHandle");
        EXPECT_EQ(fake->live_mappings(), 2u);  // only the exporter's own
        EXPECT_EQ(fake->live_reservations(), 1u);
    }
    fake->expect_clean();
}

TEST(CudaIpc, UuidsPrintLikeNvidiaSmi) {
    ipc::DeviceUuid u{};
    for (std::size_t i = 0; i < u.size(); ++i) u[i] = static_cast<std::uint8_t>(i);
    EXPECT_EQ(ipc::uuid_string(u), "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
}

// ---- pool memory: the pool's fd plus the allocation's export data ---------------------

// A View of 16 floats at `offset` into a fresh 1 MiB allocation of GPU 0's pool.
View pool_view(std::uint64_t offset, std::intptr_t stream = stridex::kNoStream) {
    stridex::Allocation a = stridex::pool_allocator().allocate(kAllocation, Device::cuda(0), 1);
    const std::int64_t shape[] = {16};
    View v(static_cast<std::byte*>(a.data) + offset, 0, Layout::contiguous(shape), dtypes::float32, Device::cuda(0),
           false, std::move(a.owner));
    v.set_stream(stream);
    return v;
}

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(CudaIpcPool, PoolMemoryTravelsAsThePoolsFdAndTheAllocationsExportData) {
    FakeCuda fake;
    const View src = pool_view(4096, 0x5010);
    const auto base = reinterpret_cast<CUdeviceptr>(src.ptr()) - 4096;
    fake->take_log();
    int fd = -1;
    {
        const ipc::Export e = ipc::Export::of(src);
        EXPECT_EQ(e.kind(), ipc::MemoryKind::pool_fd);
        EXPECT_EQ(e.offset(), 4096u);
        EXPECT_EQ(e.extent(), kAllocation);
        EXPECT_NE(e.pool_id(), 0u);
        ASSERT_EQ(e.fds().size(), 1u);
        fd = e.fds()[0];
        EXPECT_TRUE(fd_open(fd));
        CUdeviceptr named = 0;
        std::memcpy(&named, e.pool_pointer().reserved, sizeof named);
        EXPECT_EQ(named, base);  // the allocation's base, never the View's address
        ASSERT_TRUE(e.event().has_value());
        const auto log = fake->take_log();
        EXPECT_TRUE(logged(log, "pool_export_pointer p" + FakeDriver::hex(base)));
        EXPECT_TRUE(logged(log, "pool_export pool"));
        EXPECT_TRUE(logged(log, "record e1 on s5010"));  // the View's stream, like every kind
    }
    EXPECT_FALSE(fd_open(fd));  // the export closed its fd
    EXPECT_EQ(fake->events_created, fake->events_destroyed);
    EXPECT_TRUE(fake->violations.empty()) << fake->violations.front();
}

TEST(CudaIpcPool, ImportsThePoolOnceEachAllocationOnceAndFreesBeforeTheExporterMay) {
    FakeCuda fake;
    const View a_src = pool_view(256);
    const View b_src = pool_view(0);
    const ipc::Export a = ipc::Export::of(a_src);
    const ipc::Export b = ipc::Export::of(b_src);
    const auto a_base = reinterpret_cast<CUdeviceptr>(a_src.ptr()) - 256;
    fake->take_log();
    const std::string key = "exporter" + std::to_string(a.pool_id());
    std::optional<View> a1 = ipc::import_pool(a.fds()[0], key, a.pool_pointer(), a.device(), a.offset(), a.extent(),
                                              shape_of(a_src), a.event(), Owner());
    std::optional<View> a2 = ipc::import_pool(a.fds()[0], key, a.pool_pointer(), a.device(), a.offset(), a.extent(),
                                              shape_of(a_src), std::nullopt, Owner());
    std::optional<View> b1 = ipc::import_pool(b.fds()[0], key, b.pool_pointer(), b.device(), b.offset(), b.extent(),
                                              shape_of(b_src), b.event(), Owner());
    const auto log = fake->take_log();
    EXPECT_EQ(std::count_if(log.begin(), log.end(), [](const auto& l) { return l.rfind("pool_import pool", 0) == 0; }),
              1);  // one pool import for three Views of two allocations
    EXPECT_EQ(fake->imported_pool_count(), 1u);
    EXPECT_EQ(fake->imported_pointer_count(), 2u);
    EXPECT_EQ(ipc::open_pools(), 1u);
    EXPECT_EQ(ipc::open_pool_pointers(), 2u);
    EXPECT_FALSE(logged(log, "wait "));  // nothing waits at import: the event is the View's Pending
    EXPECT_EQ(reinterpret_cast<CUdeviceptr>(a1->ptr()), a_base + 0x100000000000 + 256);
    EXPECT_EQ(a1->ptr(), a2->ptr());
    EXPECT_EQ(a1->stream(), stridex::kNoStream);
    ASSERT_NE(a1->pending(), nullptr);
    EXPECT_FALSE(a1->pending()->waited());
    EXPECT_EQ(a2->pending(), nullptr);

    a1.reset();
    EXPECT_EQ(fake->imported_pointer_count(), 2u);  // a2 still uses the allocation
    a2.reset();
    EXPECT_EQ(fake->take_log(), (std::vector<std::string>{"sync dev0", "free imported p" + FakeDriver::hex(a_base)}));
    EXPECT_EQ(fake->imported_pool_count(), 1u);  // b1 still uses the pool
    b1.reset();
    const auto last = fake->take_log();
    ASSERT_EQ(last.size(), 3u);
    EXPECT_EQ(last[0], "sync dev0");                     // this process's work on it is done ...
    EXPECT_EQ(last[1].rfind("free imported p", 0), 0u);  // ... and the free complete before the release message
    EXPECT_EQ(last[2].rfind("pool_destroy pool", 0), 0u);
    EXPECT_EQ(ipc::open_pools(), 0u);
    EXPECT_EQ(ipc::open_pool_pointers(), 0u);
    EXPECT_TRUE(fake->violations.empty()) << fake->violations.front();
}

TEST(CudaIpcPool, AFailedPointerImportLeavesNoPoolBehind) {
    FakeCuda fake;
    const View src = pool_view(0);
    const ipc::Export e = ipc::Export::of(src);
    fake->fail_nth("cuMemPoolImportPointer", 1, result::out_of_memory);
    expect_error(
        [&] {
            ipc::import_pool(e.fds()[0], "k", e.pool_pointer(), e.device(), 0, e.extent(), shape_of(src), e.event(),
                             Owner());
        },
        ErrorKind::cuda, "cuMemPoolImportPointer");
    EXPECT_EQ(fake->imported_pool_count(), 0u);
    EXPECT_EQ(ipc::open_pools(), 0u);
    EXPECT_EQ(ipc::open_pool_pointers(), 0u);
    // And the next try imports afresh.
    const View v = ipc::import_pool(e.fds()[0], "k", e.pool_pointer(), e.device(), 0, e.extent(), shape_of(src),
                                    std::nullopt, Owner());
    EXPECT_EQ(ipc::open_pool_pointers(), 1u);
    EXPECT_TRUE(fake->violations.empty()) << fake->violations.front();
}

TEST(CudaIpcPool, ALayoutOutsideTheAllocationIsRefusedBeforeAnythingImports) {
    FakeCuda fake;
    const View src = pool_view(0);
    const ipc::Export e = ipc::Export::of(src);
    fake->take_log();
    expect_error(
        [&] {
            ipc::import_pool(e.fds()[0], "k", e.pool_pointer(), e.device(), kAllocation - 32, e.extent(), shape_of(src),
                             std::nullopt, Owner());
        },
        ErrorKind::value, "of a shared range of 1048576 bytes");
    EXPECT_TRUE(fake->take_log().empty());
    EXPECT_EQ(ipc::open_pools(), 0u);
}

TEST(CudaIpcPool, APoolTheDriverWouldNotMakeShareableIsRefusedNamingWhyAndWhatToDo) {
    FakeCuda fake;
    fake->pool_fd_supported = false;
    const View src = pool_view(0);
    const auto error = expect_error([&] { ipc::Export::of(src); }, ErrorKind::unsupported,
                                    "the driver refused a pool with POSIX file descriptor handles");
    EXPECT_NE(std::string(error.what()).find("VirtualBuffer(shareable=True)"), std::string::npos) << error.what();
    EXPECT_EQ(fake->events_created, 0);  // refused before any event
}

TEST(CudaIpcPool, AFailedExportClosesItsFd) {
    FakeCuda fake;
    const View src = pool_view(0);
    fake->fail_nth("cuEventRecord", 1, result::invalid_value);
    const int probe = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // the next fd number: the export's
    ::close(probe);
    expect_error([&] { ipc::Export::of(src); }, ErrorKind::cuda, "cuEventRecord");
    EXPECT_FALSE(fd_open(probe));
    EXPECT_EQ(fake->events_created, fake->events_destroyed);
}

}  // namespace
