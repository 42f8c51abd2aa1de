// The driver loader, CUresult -> error text, primary contexts and ContextGuard.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "fake_driver.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/pointer.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/cuda/vmm.hpp"

namespace {

using namespace stridex_test;
using stridex::Error;
using stridex::ErrorKind;

// Runs f, expecting stridex::Error of `kind`; returns its message.
template <class F>
std::string error_of(F&& f, ErrorKind kind) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no stridex::Error thrown";
    return {};
}

// The one list of entry points (STRIDEX_DRIVER_FUNCTIONS) against a real libcuda's exports: the
// CUDA toolkit's link stub exports every driver function, so a misspelt or withdrawn name is found
// without a GPU (loaded with dlopen, never called).
TEST(CudaLoader, EveryEntryPointIsExportedByTheToolkitsDriverStub) {
    const char* cuda_path = std::getenv("CUDA_PATH");
    const std::string root = cuda_path && *cuda_path ? cuda_path : "/usr/local/cuda";
    void* stub = dlopen((root + "/lib64/stubs/libcuda.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!stub) GTEST_SKIP() << "no CUDA toolkit driver stub under " << root << "/lib64/stubs";
    int entries = 0;
#define STRIDEX_EXPECT_EXPORTED(member, name, exported, parameters) \
    ++entries; \
    EXPECT_NE(dlsym(stub, exported), nullptr) << #member << ": " << exported;
    STRIDEX_DRIVER_FUNCTIONS(STRIDEX_EXPECT_EXPORTED)
#undef STRIDEX_EXPECT_EXPORTED
    EXPECT_GE(entries, 78);
    dlclose(stub);
}

TEST(CudaLoader, MissingLibraryIsReportedOnUseNotOnLoad) {
    DriverOverride missing("libcuda_does_not_exist.so.1");  // loading itself must not throw
    Driver& d = driver();
    EXPECT_FALSE(d.usable());
    const std::string prefix = "CUDA driver libcuda_does_not_exist.so.1 not found: ";
    EXPECT_EQ(d.unavailable_reason().rfind(prefix, 0), 0u) << d.unavailable_reason();
    // The rest is dlerror's own text, which names the library.
    EXPECT_NE(d.unavailable_reason().find("libcuda_does_not_exist.so.1", prefix.size()), std::string::npos);

    EXPECT_FALSE(cuda_available());
    EXPECT_EQ(device_count(), 0);
    // The reason, and what works without a driver (a caller may not know it asked for CUDA).
    const std::string unusable = d.unavailable_reason() +
                                 "; without a usable CUDA driver only host memory works (device='cpu')";
    EXPECT_EQ(error_of([&] { (void)d.api(); }, ErrorKind::cuda), unusable);
    EXPECT_EQ(error_of([] { VirtualBuffer buf(1 << 20); }, ErrorKind::cuda), unusable);
    EXPECT_EQ(error_of([] { order(StreamRef(5), StreamRef(7), stridex::Device::cuda(0)); }, ErrorKind::cuda), unusable);
    // Without a driver no memory can be CUDA memory.
    int x = 0;
    EXPECT_EQ(pointer_info(reinterpret_cast<std::uintptr_t>(&x)).memory_type, MemoryType::host);
    EXPECT_EQ(device_of_pointer(reinterpret_cast<std::uintptr_t>(&x)), stridex::Device::cpu());
}

TEST(CudaLoader, LibraryWithoutCuInitIsNotADriver) {
    DriverOverride libm("libm.so.6");
    EXPECT_FALSE(driver().usable());
    EXPECT_EQ(driver().unavailable_reason(), "CUDA driver libm.so.6 has no cuInit: not a CUDA driver");
}

TEST(CudaLoader, StubLibraryFailsInCuInit) {
    // The toolkit's link stub exports every symbol but refuses cuInit: the loader must resolve
    // the table through it and report cuInit's error by name. In a child process: the stub's
    // SONAME is libcuda.so.1, so once loaded (never closed) it would shadow the real driver for
    // every later dlopen("libcuda.so.1") of this process.
    const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
    if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            DriverOverride loaded(stub);
            const std::string expected = std::string("CUDA driver ") + stub +
                                         ": cuInit: CUDA_ERROR_STUB_LIBRARY (the loaded libcuda is the CUDA toolkit's "
                                         "link stub, not a driver: check LD_LIBRARY_PATH)";
            const bool ok = !driver().usable() && driver().unavailable_reason() == expected;
            if (!ok) std::fprintf(stderr, "reason: %s\n", driver().unavailable_reason().c_str());
            std::_Exit(ok ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST(CudaLoader, ProcessDriverNeverThrowsOnQueries) {
    // Whatever this machine has: the queries answer, and an unusable driver names libcuda.so.1.
    EXPECT_EQ(cuda_available(), device_count() > 0);
    if (!driver().usable()) {
        EXPECT_NE(driver().unavailable_reason().find("libcuda.so.1"), std::string::npos)
            << driver().unavailable_reason();
    }
}

TEST(CudaDriver, InitFailureNamesTheError) {
    FakeCuda fake(1, 2 * MiB, result::no_device);
    EXPECT_FALSE(driver().usable());
    EXPECT_EQ(driver().unavailable_reason(),
              "CUDA driver test driver: cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
    EXPECT_FALSE(cuda_available());
}

TEST(CudaDriver, ResultTextHasNameAndDescription) {
    FakeCuda fake;
    Driver& d = driver();
    EXPECT_EQ(d.describe(result::out_of_memory), "CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
    try {
        d.fail_call("cuMemMap", result::out_of_memory);
        FAIL();
    } catch (const DriverError& e) {
        EXPECT_EQ(std::string(e.what()), "cuMemMap: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
        EXPECT_EQ(e.kind(), ErrorKind::cuda);
        EXPECT_EQ(e.code(), result::out_of_memory);
    }
    // Codes the driver does not know still give a message.
    EXPECT_EQ(d.describe(9999), "CUDA error 9999 (no description from the driver)");
}

TEST(CudaDriver, CallThroughAMissingEntryNamesIt) {
    FakeCuda fake;
    DriverTable table = fake->table();
    table.mem_map = nullptr;
    DriverOverride partial(table);
    EXPECT_EQ(error_of(
                  [] {
                      driver().call("cuMemMap", driver().api().mem_map, 0ull, std::size_t{0}, std::size_t{0}, 0ull,
                                    0ull);
                  },
                  ErrorKind::cuda),
              "cuMemMap is not provided by the loaded CUDA driver (is it older than CUDA 12?)");
}

TEST(CudaDriver, DeviceCountAndOrdinals) {
    FakeCuda fake(3);
    EXPECT_TRUE(cuda_available());
    EXPECT_EQ(device_count(), 3);
    EXPECT_EQ(driver().device(2), 102);
    EXPECT_EQ(error_of([] { (void)driver().device(3); }, ErrorKind::value),
              "CUDA device 3 does not exist (the driver sees 3 devices)");
    EXPECT_EQ(error_of([] { (void)driver().device(-1); }, ErrorKind::value),
              "CUDA device -1 does not exist (the driver sees 3 devices)");
}

TEST(CudaDriver, OverridesNestAndRestore) {
    FakeCuda outer(2);
    Driver* outer_driver = &driver();
    {
        FakeCuda inner(5);
        EXPECT_EQ(device_count(), 5);
    }
    EXPECT_EQ(&driver(), outer_driver);
    EXPECT_EQ(device_count(), 2);
}

TEST(CudaContext, PrimaryContextIsRetainedOncePerDevice) {
    FakeCuda fake(2);
    {
        for (int i = 0; i < 3; ++i) {
            ContextGuard a(0);
            ContextGuard b(1);
        }
        EXPECT_EQ(fake->retained(0), 1);
        EXPECT_EQ(fake->retained(1), 1);
        EXPECT_EQ(driver().primary_context(1), fake->context_of(1));
    }
}

TEST(CudaContext, GuardRestoresNoContext) {
    FakeCuda fake;
    ASSERT_EQ(fake->current, nullptr);
    {
        ContextGuard g(0);
        EXPECT_EQ(fake->current, fake->context_of(0));
        EXPECT_EQ(g.context(), fake->context_of(0));
    }
    EXPECT_EQ(fake->current, nullptr);
    EXPECT_EQ(fake->ctx_log, (std::vector<std::string>{"retain dev0", "set ctx0", "set none"}));
}

TEST(CudaContext, GuardDoesNothingWhenAlreadyCurrent) {
    FakeCuda fake;
    fake->current = fake->context_of(0);
    { ContextGuard g(0); }
    EXPECT_EQ(fake->current, fake->context_of(0));
    EXPECT_EQ(fake->ctx_log, (std::vector<std::string>{"retain dev0"}));  // no set at all
}

TEST(CudaContext, GuardRestoresTheCallersOtherContext) {
    FakeCuda fake(2);
    const CUcontext users = fake->context_of(1);
    fake->current = users;
    {
        ContextGuard g(0);
        EXPECT_EQ(fake->current, fake->context_of(0));
        {
            ContextGuard nested(1);
            EXPECT_EQ(fake->current, users);
        }
        EXPECT_EQ(fake->current, fake->context_of(0));
    }
    EXPECT_EQ(fake->current, users);
}

TEST(CudaContext, DriverReleasesWhatItRetained) {
    // Only test drivers are ever destroyed; they give back contexts and pooled events.
    FakeDriver fake;
    fake.devices = 2;
    FakeDriver* previous = std::exchange(g_fake, &fake);
    {
        DriverOverride o(fake.table());
        ContextGuard g(1);
        driver().release_event(1, driver().acquire_event(1));
        EXPECT_EQ(fake.retained(1), 1);
    }
    EXPECT_EQ(fake.retained(1), 0);
    EXPECT_EQ(fake.events_created, 1);
    EXPECT_EQ(fake.events_destroyed, 1);
    g_fake = previous;
}

}  // namespace
