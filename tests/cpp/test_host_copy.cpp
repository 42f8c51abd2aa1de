// The host <-> device paths of the copy engine against the fake driver (docs/memory.md, "Host
// memory"): the pageable pool's blocks are page-locked at their first copy (or first reuse, or
// never, as STRIDEX_HOST_COPY says) and then moved by the DMA engine directly, still complete on
// return; a refused registration falls back to the staging buffers; captures refuse pool blocks;
// the staging pipeline moves exact bytes for every tuning (buffer size, buffers in flight, threads,
// streaming stores), contiguous and strided, both ways. GPU: tests/python/test_memory_gpu.py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "fake_driver.hpp"
#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/memory.hpp"

namespace stridex {
namespace {

using Log = std::vector<std::string>;
constexpr std::intptr_t kProducer = 0x5010, kCopyStream = 0x5020;
constexpr std::int64_t kFloats = std::int64_t{1} << 18;  // 1 MiB of float32: a pageable pool result

// Sets STRIDEX_HOST_COPY for a scope.
struct Tuning {
    explicit Tuning(const char* value) { ::setenv("STRIDEX_HOST_COPY", value, 1); }
    ~Tuning() { ::unsetenv("STRIDEX_HOST_COPY"); }
    Tuning(const Tuning&) = delete;
    Tuning& operator=(const Tuning&) = delete;
};

// The log lines that start with one of `prefixes` (the pointer queries and staging addresses of
// the others vary).
Log only(const Log& log, std::initializer_list<const char*> prefixes) {
    Log out;
    for (const std::string& line : log)
        for (const char* p : prefixes)
            if (line.rfind(p, 0) == 0) out.push_back(line);
    return out;
}

// "Device" memory of cuda:0 the fake backs with a host vector, filled with 0, 1, 2, ...
struct DeviceFloats {
    std::vector<float> data;
    DeviceFloats(stridex_test::FakeCuda& fake, std::int64_t n) : data(static_cast<std::size_t>(n)) {
        std::iota(data.begin(), data.end(), 0.0f);
        fake->add_pointer_range(reinterpret_cast<cuda::CUdeviceptr>(data.data()), data.size() * sizeof(float),
                                cuda::cu::kMemoryTypeDevice, false, 0);
    }
    View view(std::vector<std::int64_t> shape, std::intptr_t stream = kNoStream) {
        View v(data.data(), 0, Layout::contiguous(shape), dtypes::float32, Device::cuda(0), false, Owner());
        v.set_stream(stream);
        return v;
    }
};

bool counts_up(const View& v) {
    const auto* f = reinterpret_cast<const float*>(v.ptr());
    for (std::int64_t i = 0; i < v.size(); ++i)
        if (f[i] != static_cast<float>(i)) return false;
    return true;
}

// A fake GPU holding 1 MiB of counting floats, and an empty pageable pool; emptied again and the
// driver checked clean after each test.
class PageablePool : public ::testing::Test {
protected:
    PageablePool() { cuda::trim_host_pools(); }
    void TearDown() override {
        cuda::trim_host_pools();
        fake->expect_clean();
    }
    // A fresh cpu result with the device's floats copied into it (complete on return).
    View copied_result() {
        View out = allocate(shape, dtypes::float32, Device::cpu());
        EXPECT_EQ(copy(out, dev.view(shape), kCopyStream), kNoStream);
        return out;
    }

    stridex_test::FakeCuda fake;
    DeviceFloats dev{fake, kFloats};
    const std::vector<std::int64_t> shape{kFloats};
};

TEST_F(PageablePool, AFreshCpuResultIsRegisteredAtItsFirstCopyThenMovedDirectlyAndComplete) {
    const Tuning tuning("register=first");
    View out = allocate(shape, dtypes::float32, Device::cpu());
    void* const block = out.data();
    (void)fake->take_log();
    // The block is registered; the source's producer is waited for on the GPU; the DMA writes the
    // block; the host waits for it.
    EXPECT_EQ(copy(out, dev.view(shape, kProducer), kCopyStream), kNoStream);
    EXPECT_EQ(only(fake->take_log(), {"record", "wait", "host_register", "memcpy", "stream_sync", "event_sync"}),
              (Log{"host_register 2M", "record e1 on s5010 ctx0", "wait s5020 on e1",
                   "memcpy_async pinned+0 <- device+0 1048576 on s5020", "stream_sync s5020"}));
    EXPECT_TRUE(counts_up(out));
    EXPECT_EQ(cuda::pageable_pool_stats().registered, 2 * stridex_test::MiB);
    // The same block comes back, registered: no second registration.
    out = View();
    View again = allocate(shape, dtypes::float32, Device::cpu());
    EXPECT_EQ(again.data(), block);
    EXPECT_EQ(copy(again, dev.view(shape), kCopyStream), kNoStream);
    EXPECT_EQ(only(fake->take_log(), {"host_register", "memcpy", "stream_sync"}),
              (Log{"memcpy_async pinned+0 <- device+0 1048576 on s5020", "stream_sync s5020"}));
    // From the block to the GPU: direct as well, and complete before returning.
    std::fill(dev.data.begin(), dev.data.end(), 0.0f);
    EXPECT_EQ(copy(dev.view(shape), again, kCopyStream), kNoStream);
    EXPECT_EQ(only(fake->take_log(), {"host_register", "memcpy", "stream_sync"}),
              (Log{"memcpy_async device+0 <- pinned+0 1048576 on s5020", "stream_sync s5020"}));
    EXPECT_EQ(dev.data[12345], 12345.0f);
    // empty_cache('cpu') unregisters the block before unmapping it.
    again = View();
    cuda::trim_host_pools();
    EXPECT_EQ(only(fake->take_log(), {"host_unregister"}), (Log{"host_unregister 2M"}));
    EXPECT_EQ(cuda::pageable_pool_stats().registered, 0u);
    EXPECT_EQ(cuda::pageable_pool_stats().reserved, 0u);
    EXPECT_TRUE(fake->registered.empty());
}

TEST_F(PageablePool, ABlockReleasedPastTheCacheIsUnregisteredBeforeItIsUnmapped) {
    const Tuning tuning("register=first");
    View out = copied_result();
    // A 1 GiB result (never touched) released first fills the cache: the registered block no longer fits.
    View big = allocate(std::vector<std::int64_t>{std::int64_t{1} << 30}, dtypes::uint8, Device::cpu());
    big = View();
    (void)fake->take_log();
    out = View();
    EXPECT_EQ(only(fake->take_log(), {"host_unregister"}), (Log{"host_unregister 2M"}));
    EXPECT_TRUE(fake->registered.empty());
    EXPECT_EQ(cuda::pageable_pool_stats().registered, 0u);
    EXPECT_EQ(cuda::pageable_pool_stats().reserved, std::uint64_t{1} << 30);  // the cached 1 GiB block
    cuda::trim_host_pools();
    EXPECT_EQ(cuda::pageable_pool_stats().reserved, 0u);
}

TEST_F(PageablePool, ByDefaultABlockIsRegisteredOnReuseAndItsFirstCopyIsStaged) {
    View out = allocate(shape, dtypes::float32, Device::cpu());
    (void)fake->take_log();
    EXPECT_EQ(copy(out, dev.view(shape), kCopyStream), kNoStream);
    const Log first = fake->take_log();
    EXPECT_TRUE(only(first, {"host_register"}).empty());
    EXPECT_EQ(only(first, {"host_alloc"}).size(), 4u);  // the staging buffers
    EXPECT_TRUE(counts_up(out));
    out = View();
    View again = allocate(shape, dtypes::float32, Device::cpu());
    EXPECT_EQ(copy(again, dev.view(shape), kCopyStream), kNoStream);
    EXPECT_EQ(only(fake->take_log(), {"host_register", "memcpy"}),
              (Log{"host_register 2M", "memcpy_async pinned+0 <- device+0 1048576 on s5020"}));
    EXPECT_TRUE(counts_up(again));
    again = View();
}

TEST_F(PageablePool, NeverRegisteredAndARefusedRegistrationIsNotAskedAgain) {
    {
        const Tuning tuning("register=never");
        View out = allocate(shape, dtypes::float32, Device::cpu());
        EXPECT_EQ(copy(out, dev.view(shape), kCopyStream), kNoStream);
        EXPECT_TRUE(only(fake->take_log(), {"host_register"}).empty());
        EXPECT_TRUE(counts_up(out));
    }
    cuda::trim_host_pools();
    const Tuning tuning("register=first");
    fake->fail_nth("cuMemHostRegister", 1, 2);  // CUDA_ERROR_OUT_OF_MEMORY
    View out = copied_result();
    EXPECT_EQ(only(fake->take_log(), {"cuMemHostRegister", "host_register"}),
              (Log{"cuMemHostRegister -> injected error 2"}));
    EXPECT_TRUE(counts_up(out));
    EXPECT_EQ(copy(out, dev.view(shape), kCopyStream), kNoStream);  // staged again, not asked again
    EXPECT_TRUE(only(fake->take_log(), {"cuMemHostRegister", "host_register"}).empty());
    EXPECT_EQ(cuda::pageable_pool_stats().registered, 0u);
    out = View();
}

TEST_F(PageablePool, ACaptureRefusesAPoolBlockEvenWhenRegistered) {
    const Tuning tuning("register=first");
    View out = copied_result();  // registered now
    fake->begin_capture(reinterpret_cast<cuda::CUstream>(kCopyStream), 7);
    (void)fake->take_log();
    EXPECT_ERROR(copy(out, dev.view(shape), kCopyStream), cuda,
                 "needs the CPU (pageable host memory is staged or waited for by the host)");
    EXPECT_TRUE(only(fake->take_log(), {"memcpy", "host_register"}).empty());
    fake->end_capture(reinterpret_cast<cuda::CUstream>(kCopyStream));
    out = View();
}

TEST(HostTuning, ABadSettingIsAValueErrorNamingTheItem) {
    stridex_test::FakeCuda fake;
    DeviceFloats dev(fake, kFloats);
    std::vector<float> host(static_cast<std::size_t>(kFloats));
    const View h(host.data(), 0, Layout::contiguous(std::vector<std::int64_t>{kFloats}), dtypes::float32, Device::cpu(),
                 false, Owner());
    const std::vector<std::int64_t> shape{kFloats};
    {
        const Tuning tuning("stages=1");
        EXPECT_ERROR(copy(h, dev.view(shape), kCopyStream), value,
                     "STRIDEX_HOST_COPY: stages is 2 to 16, found 'stages=1'");
        // A copy without a host side never reads it.
        DeviceFloats other(fake, kFloats);
        EXPECT_EQ(copy(other.view(shape), dev.view(shape), kCopyStream), kCopyStream);
    }
    {
        const Tuning tuning("stage_mib=4,speed=9");
        EXPECT_ERROR(copy(h, dev.view(shape), kCopyStream), value,
                     "STRIDEX_HOST_COPY: expected stage_mib, stages, threads, streaming, pack_streaming or register, "
                     "found 'speed=9'");
    }
    {
        const Tuning tuning("register");
        EXPECT_ERROR(copy(h, dev.view(shape), kCopyStream), value,
                     "STRIDEX_HOST_COPY: expected key=value items separated by commas, found 'register'");
    }
    {
        const Tuning tuning("register=always");
        EXPECT_ERROR(copy(h, dev.view(shape), kCopyStream), value,
                     "STRIDEX_HOST_COPY: register is first, reuse or never, found 'register=always'");
    }
    fake->expect_clean();
}

// Foreign pageable memory through the staging buffers, for every tuning: exact bytes both ways,
// contiguous, a column block (rows of 3 KiB out of 5 KiB) and every other row.
TEST(Staging, EveryTuningMovesExactBytesBothWays) {
    const char* settings[] = {"", "stage_mib=1,stages=2,threads=1,streaming=0", "stage_mib=1,stages=3,threads=3",
                              "stage_mib=2,stages=8,threads=16,streaming=1,pack_streaming=1"};
    constexpr std::int64_t rows = 1024, cols = 1280;  // 5 MiB of float32
    for (const char* setting : settings) {
        SCOPED_TRACE(setting);
        stridex_test::FakeCuda fake;
        const Tuning tuning(setting);
        DeviceFloats dev(fake, rows * cols);
        std::vector<float> host(static_cast<std::size_t>(rows * cols), -1.0f);
        auto host_view = [&](std::vector<std::int64_t> shape, std::vector<std::int64_t> strides) {
            return View(host.data(), 0, Layout(shape, strides), dtypes::float32, Device::cpu(), false, Owner());
        };
        const struct {
            const char* name;
            std::vector<std::int64_t> shape, strides;
        } layouts[] = {{"contiguous", {rows * cols}, {1}},
                       {"column block", {rows, 768}, {cols, 1}},
                       {"every other row", {rows / 2, cols}, {2 * cols, 1}}};
        for (const auto& l : layouts) {
            SCOPED_TRACE(l.name);
            const View h = host_view(l.shape, l.strides);
            std::fill(host.begin(), host.end(), -1.0f);
            EXPECT_EQ(copy(h, dev.view(l.shape, kProducer), kCopyStream), kNoStream);  // complete on return
            std::int64_t wrong = 0, i = 0;
            const std::int64_t inner = l.shape.back(), outer = h.size() / inner;
            for (std::int64_t r = 0; r < outer; ++r)
                for (std::int64_t c = 0; c < inner; ++c, ++i)
                    wrong += host[static_cast<std::size_t>(r * (l.strides.size() == 1 ? inner : l.strides[0]) + c)] !=
                             static_cast<float>(i);
            EXPECT_EQ(wrong, 0) << "to the host";
            std::fill(dev.data.begin(), dev.data.end(), 0.0f);
            copy(dev.view(l.shape), h, kCopyStream);
            wrong = 0;
            for (i = 0; i < h.size(); ++i) wrong += dev.data[static_cast<std::size_t>(i)] != static_cast<float>(i);
            EXPECT_EQ(wrong, 0) << "to the device";
            std::iota(dev.data.begin(), dev.data.end(), 0.0f);
        }
        EXPECT_TRUE(only(fake->take_log(), {"host_register"}).empty());
        fake->expect_clean();
    }
}

}  // namespace
}  // namespace stridex
