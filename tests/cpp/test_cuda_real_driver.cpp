// The CUDA layer against the real driver: skipped (with the reason) where no GPU is visible.
// The fake driver proves the bookkeeping; these prove the ABI declarations and the driver's
// actual answers (attribute widths, granularity, error text, copies through mapped chunks).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/ipc.hpp"
#include "stridex/cuda/pointer.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/cuda/vmm.hpp"

namespace {

using namespace stridex::cuda;
using stridex::Device;

constexpr std::size_t MiB = std::size_t{1} << 20;

class RealDriver : public ::testing::Test {
protected:
    void SetUp() override {
        if (!cuda_available())
            GTEST_SKIP() << "no CUDA device: "
                         << (driver().usable() ? "the driver sees 0 devices" : driver().unavailable_reason());
    }
    static CUcontext current() {
        CUcontext c = nullptr;
        driver().call("cuCtxGetCurrent", driver().api().ctx_get_current, &c);
        return c;
    }
};

TEST_F(RealDriver, VirtualBufferMemoryIsDeviceMemoryAtChunkOffsets) {
    VirtualBuffer buf(64 * MiB, 8 * MiB, VirtualBufferOptions{{0}, 2 * MiB});
    EXPECT_EQ(buf.granularity() % (2 * MiB), 0u) << "granularity " << buf.granularity();
    for (std::size_t i = 0; i < buf.num_chunks(); ++i) {
        const DevicePtr p = buf.base() + i * buf.chunk_size();
        const PointerInfo info = pointer_info(p.address());
        EXPECT_EQ(info.memory_type, MemoryType::device) << i;
        EXPECT_EQ(info.device_ordinal, 0);
        EXPECT_FALSE(info.host_accessible);
        EXPECT_LE(info.base, p.address());
        EXPECT_LT(p.address(), info.base + info.size);
    }
    int host = 0;
    EXPECT_EQ(pointer_info(reinterpret_cast<std::uintptr_t>(&host)).memory_type, MemoryType::host);
}

TEST_F(RealDriver, SleepKeepingContentsRoundTripsThroughTheDevice) {
    Driver& d = driver();
    VirtualBuffer buf(32 * MiB, 5 * MiB, VirtualBufferOptions{{0}, 2 * MiB});
    std::vector<std::uint32_t> pattern(5 * MiB / 4);
    std::iota(pattern.begin(), pattern.end(), 7u);
    {
        const ContextGuard g(0);
        d.call("cuMemcpyHtoD", d.api().memcpy_htod, buf.base().cu(), static_cast<const void*>(pattern.data()), 5 * MiB);
    }
    const DevicePtr base = buf.base();
    buf.sleep(true);
    EXPECT_EQ(buf.num_chunks(), 0u);
    buf.wake();
    EXPECT_EQ(buf.base(), base);
    EXPECT_FALSE(buf.contents_lost());
    std::vector<std::uint32_t> back(pattern.size());
    {
        const ContextGuard g(0);
        d.call("cuMemcpyDtoH", d.api().memcpy_dtoh, static_cast<void*>(back.data()), buf.base().cu(), 5 * MiB);
    }
    EXPECT_EQ(back, pattern);
}

TEST_F(RealDriver, OutOfMemoryRollsBackWithTheDriversText) {
    std::size_t free = 0, total = 0;
    {
        const ContextGuard g(0);
        driver().call("cuMemGetInfo", driver().api().mem_get_info, &free, &total);
    }
    const std::size_t chunk = std::size_t{1} << 30;
    VirtualBuffer buf(2 * total, 0, VirtualBufferOptions{{0}, chunk});
    try {
        buf.grow(2 * total);
        FAIL() << "grew past the device's memory";
    } catch (const DriverError& e) {
        EXPECT_EQ(e.code(), result::out_of_memory);
        EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_OUT_OF_MEMORY (out of memory); the buffer is unchanged"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(buf.num_chunks(), 0u);
    std::size_t free_after = 0;
    {
        const ContextGuard g(0);
        driver().call("cuMemGetInfo", driver().api().mem_get_info, &free_after, &total);
    }
    EXPECT_GT(free_after + 256 * MiB, free) << "the failed grow leaked device memory";
}

TEST_F(RealDriver, OrderAndStreamsLeaveNoContextBehind) {
    const CUcontext before = current();
    {
        Stream a = Stream::create(0);
        Stream b = Stream::create(0);
        order(a.ref(), b.ref(), Device::cuda(0));
        order(StreamRef::legacy(), a.ref(), Device::cuda(0));
        order(a.ref(), StreamRef::per_thread(), Device::cuda(0));
        b.synchronize();
        Event e(0);
        e.record(a.ref());
        e.synchronize();
    }
    EXPECT_EQ(current(), before);
}

TEST_F(RealDriver, ContextGuardRestoresNoContext) {
    if (current() != nullptr) GTEST_SKIP() << "a context is already current on this thread";
    {
        const ContextGuard g(0);
        EXPECT_EQ(current(), driver().primary_context(0));
    }
    EXPECT_EQ(current(), nullptr);
}

TEST_F(RealDriver, ErrorTextComesFromTheDriver) {
    EXPECT_EQ(driver().describe(result::out_of_memory), "CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
    EXPECT_GE(driver().version(), 12000);
}

TEST_F(RealDriver, StripingOverTwoDevices) {
    if (device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices, found " << device_count();
    try {
        VirtualBuffer buf(16 * MiB, 16 * MiB, VirtualBufferOptions{{0, 1}, 2 * MiB});
        for (std::size_t i = 0; i < buf.num_chunks(); ++i)
            EXPECT_EQ(pointer_info((buf.base() + i * buf.chunk_size()).address()).device_ordinal,
                      static_cast<int>(i % 2));
        buf.sleep(true);
        buf.wake();
    } catch (const stridex::Error& e) {
        if (std::string(e.what()).find("cuDeviceCanAccessPeer") != std::string::npos) GTEST_SKIP() << e.what();
        throw;
    }
}

// ---- Interprocess sharing (ipc.hpp), one process playing both sides ------------------------------

TEST_F(RealDriver, ShareableVirtualBufferChunksImportAsTheSameMemory) {
    Driver& d = driver();
    VirtualBufferOptions options{{0}, 2 * MiB};
    options.shareable = true;
    VirtualBuffer buf(8 * MiB, 6 * MiB, options);
    const std::int64_t shape[] = {static_cast<std::int64_t>(MiB)};  // 4 MiB of uint32 from 1 MiB in
    const stridex::View src = buf.view(stridex::dtypes::uint32, shape, static_cast<std::int64_t>(MiB));
    std::vector<std::uint32_t> pattern(MiB);
    std::iota(pattern.begin(), pattern.end(), 11u);
    const ContextGuard g(0);
    d.call("cuMemcpyHtoD", d.api().memcpy_htod, reinterpret_cast<CUdeviceptr>(src.ptr()),
           static_cast<const void*>(pattern.data()), 4 * MiB);
    {
        const ipc::Export e = ipc::Export::of(src);
        ASSERT_EQ(e.kind(), ipc::MemoryKind::vmm_fds);
        EXPECT_EQ(e.fds().size(), 3u);
        EXPECT_EQ(e.device(), ipc::device_uuid(0));
        EXPECT_EQ(ipc::ordinal_of(e.device()), 0);
        const ipc::Shape s{{static_cast<std::int64_t>(MiB)}, {1}, stridex::dtypes::uint32, false};
        // No event: opening an IPC event handle in the process that made it failed with
        // CUDA_ERROR_INVALID_CONTEXT on an H100; ordering is checked across processes in Python.
        const stridex::View v = ipc::import_fds(e.fds(), e.chunk_size(), e.device(), e.offset(), s, std::nullopt,
                                                stridex::Owner());
        EXPECT_NE(v.ptr(), src.ptr());  // a fresh reservation
        std::vector<std::uint32_t> back(MiB);
        d.call("cuMemcpyDtoH", d.api().memcpy_dtoh, static_cast<void*>(back.data()),
               reinterpret_cast<CUdeviceptr>(v.ptr()), 4 * MiB);
        EXPECT_EQ(back, pattern);
    }
}

TEST_F(RealDriver, VirtualBufferMemoryThatIsNotShareableIsRefusedByName) {
    VirtualBuffer buf(4 * MiB, 4 * MiB, VirtualBufferOptions{{0}, 2 * MiB});
    const std::int64_t shape[] = {16};
    const stridex::View v = buf.view(stridex::dtypes::uint8, shape);
    try {
        (void)ipc::Export::of(v);
        FAIL() << "exported memory without IPC support";
    } catch (const stridex::Error& e) {
        EXPECT_EQ(e.kind(), stridex::ErrorKind::unsupported) << e.what();
        EXPECT_NE(std::string(e.what()).find("cannot share"), std::string::npos) << e.what();
    }
}

TEST_F(RealDriver, DeviceUuidsAreDistinctAndFindTheirOrdinal) {
    for (int i = 0; i < device_count(); ++i) {
        EXPECT_EQ(ipc::ordinal_of(ipc::device_uuid(i)), i);
        EXPECT_EQ(ipc::uuid_string(ipc::device_uuid(i)).rfind("GPU-", 0), 0u);
    }
}

}  // namespace
