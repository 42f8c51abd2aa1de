// Typed constraints (include/stridex/cuda/constraints.hpp) and owning Arrays (include/stridex/cuda/array.hpp).
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "expect_error.hpp"
#include "stridex/cuda/array.hpp"
#include "stridex/cuda/constraints.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/from_pointer.hpp"

namespace stridex {
namespace {

using testing::throws_error;

View host_view(std::vector<float>& buf, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
               bool readonly = false, Device device = Device::cpu()) {
    return View(buf.data(), 0, Layout(shape, strides), dtypes::float32, device, readonly, Owner());
}

// The descriptions are compile-time strings: what signatures and errors print.
static_assert(std::string_view(description<>()) == "stridex.View");
static_assert(std::string_view(description<arg::dtype<float>, arg::ndim<1>>()) ==
              "stridex.View[dtype=float32, ndim=1]");
static_assert(std::string_view(description<arg::shape<arg::any, 3>, arg::cuda, arg::c_contig, arg::writable>()) ==
              "stridex.View[shape=(*, 3), device=cuda, order=C, writable]");
static_assert(std::string_view(description<arg::shape<4>, arg::device<DeviceType::kCUDA, 1>>()) ==
              "stridex.View[shape=(4,), device=cuda:1]");
static_assert(std::string_view(description<arg::dtype_is<dtypes::bfloat16>, arg::f_contig, arg::may_copy>()) ==
              "stridex.View[dtype=bfloat16, order=F, may_copy]");
static_assert(std::string_view(description<arg::dtype_is<dtypes::float8_e5m2>, arg::caller_stream>()) ==
              "stridex.View[dtype=float8_e5m2, caller_stream]");
static_assert(requirements_of<arg::shape<2, 3>, arg::ndim<2>>().ndim == 2);
// An output is written, so writable: read-only views are refused as for arg::writable.
static_assert(std::string_view(description<arg::dtype<double>, arg::ndim<1>, arg::output>()) ==
              "stridex.View[dtype=float64, ndim=1, writable, output]");
static_assert(requirements_of<arg::output>().writable && requirements_of<arg::output>().output);
static_assert(!requirements_of<arg::writable>().output);

TEST(Constraints, EachOneChecked) {
    std::vector<float> buf(12);
    const View m = host_view(buf, {3, 4}, {4, 1});
    EXPECT_TRUE(satisfies(requirements_of<>(), m));
    EXPECT_TRUE(
        satisfies(requirements_of<arg::dtype<float>, arg::shape<3, arg::any>, arg::cpu, arg::c_contig, arg::writable>(),
                  m));
    EXPECT_FALSE(satisfies(requirements_of<arg::dtype<double>>(), m));
    EXPECT_FALSE(satisfies(requirements_of<arg::ndim<1>>(), m));
    EXPECT_FALSE(satisfies(requirements_of<arg::shape<arg::any, 3>>(), m));
    EXPECT_FALSE(satisfies(requirements_of<arg::cuda>(), m));
    EXPECT_FALSE(satisfies(requirements_of<arg::device<DeviceType::kCPU, 1>>(), m));
    EXPECT_FALSE(satisfies(requirements_of<arg::f_contig>(), m));
    EXPECT_TRUE(satisfies(requirements_of<arg::f_contig>(), m.transpose()));
    EXPECT_FALSE(satisfies(requirements_of<arg::c_contig>(), m.transpose()));
    EXPECT_FALSE(satisfies(requirements_of<arg::writable>(), m.as_readonly()));
    EXPECT_FALSE(satisfies(requirements_of<arg::output>(), m.as_readonly()));
    EXPECT_TRUE(satisfies(requirements_of<arg::output>(), m));
    EXPECT_TRUE(satisfies(requirements_of<arg::dtype<float>>(), m.as_readonly()));  // read-only is fine unless writable
}

TEST(Constraints, ConformNamesExpectedAndFound) {
    std::vector<float> buf(12);
    const View m = host_view(buf, {3, 4}, {4, 1}, /*readonly=*/true);
    EXPECT_TRUE(throws_error([&] { (void)conform(requirements_of<arg::dtype<double>, arg::writable>(), m); },
                             ErrorKind::type,
                             "expected stridex.View[dtype=float64, writable], found float32, shape=(3, 4), "
                             "strides=(4, 1), device=cpu, read-only"));
    const View same = conform(requirements_of<arg::ndim<2>>(), m);
    EXPECT_EQ(same.ptr(), m.ptr());  // satisfied: no copy
}

TEST(Constraints, MayCopyCopiesOnlyTheLayout) {
    std::vector<float> buf(12);
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i);
    const View t = host_view(buf, {3, 4}, {4, 1}).transpose();  // (4, 3), F order
    const View c = conform(requirements_of<arg::dtype<float>, arg::c_contig, arg::may_copy>(), t);
    EXPECT_NE(c.ptr(), t.ptr());
    EXPECT_TRUE(c.layout().is_c_contiguous());
    EXPECT_EQ((c.as<const float, 2>()(1, 2)), 9.f);  // element (1, 2) of the transpose is buf[2 * 4 + 1]
    // Already contiguous: the same memory, no copy.
    EXPECT_EQ(conform(requirements_of<arg::f_contig, arg::may_copy>(), t).ptr(), t.ptr());
    // F order from a C-order view.
    const View f = conform(requirements_of<arg::f_contig, arg::may_copy>(), host_view(buf, {3, 4}, {4, 1}));
    EXPECT_TRUE(f.layout().is_f_contiguous());
    EXPECT_EQ((f.as<const float, 2>()(2, 1)), 9.f);
    // A dtype mismatch is never copied away.
    EXPECT_TRUE(
        throws_error([&] { (void)conform(requirements_of<arg::dtype<double>, arg::c_contig, arg::may_copy>(), t); },
                     ErrorKind::type, "expected stridex.View[dtype=float64, order=C, may_copy]"));
}

TEST(Constraints, MayCopyOfDeviceMemoryIsTheCopyEnginesJob) {
    // Device memory is never copied on the host: may_copy hands it to the copy engine, which needs a
    // driver. (With one, the copy engine's own tests cover the copy; a host buffer labelled cuda:0
    // must not reach a real GPU.)
    if (cuda::cuda_available()) GTEST_SKIP() << "needs a machine without a CUDA driver";
    std::vector<float> buf(12);
    const View gpu = host_view(buf, {3, 4}, {4, 1}, false, Device::cuda(0)).transpose();
    EXPECT_THROW((void)conform(requirements_of<arg::c_contig, arg::may_copy>(), gpu), Error);
}

TEST(Array, HostIsOwnedContiguousAndWritable) {
    Array a = Array::host({2, 3}, dtypes::float64);
    EXPECT_EQ(a.device(), Device::cpu());
    EXPECT_TRUE(a.layout().is_c_contiguous());
    EXPECT_FALSE(a.readonly());
    EXPECT_EQ(a.owner().use_count(), 1);
    a.as<double, 2>()(1, 2) = 5.0;
    View alias = a;  // a View of the Array keeps the memory
    a = Array();
    EXPECT_EQ((alias.as<const double, 2>()(1, 2)), 5.0);
}

int g_freed = 0;
void count_free(void* p) noexcept {
    ++g_freed;
    delete[] static_cast<float*>(p);
}

TEST(Array, AdoptRunsTheDeleterOnceAndFindsTheDevice) {
    g_freed = 0;
    {
        auto* data = new float[4]();
        const std::int64_t shape[] = {4};
        Array a = Array::adopt(data, Layout::contiguous(shape), dtypes::float32, &count_free, data);
        EXPECT_EQ(a.device(), Device::cpu());  // host memory, whatever the driver
        View copy = a;
        EXPECT_EQ(g_freed, 0);
    }
    EXPECT_EQ(g_freed, 1);
}

TEST(Array, AdoptRefusesAWrongDeviceAndStillFrees) {
    if (cuda::device_count() > 0) GTEST_SKIP() << "needs a machine without a CUDA device";
    g_freed = 0;
    auto* data = new float[4]();
    const std::int64_t shape[] = {4};
    EXPECT_TRUE(throws_error(
        [&] {
            (void)Array::adopt(data, Layout::contiguous(shape), dtypes::float32, &count_free, data, Device::cuda(0));
        },
        ErrorKind::value));
    EXPECT_EQ(g_freed, 1);
}

TEST(Array, DeviceMemoryNeedsADriver) {
    if (cuda::device_count() > 0) GTEST_SKIP() << "needs a machine without a CUDA device";
    EXPECT_TRUE(throws_error([] { (void)Array::cuda({4}, dtypes::float32, 0); }, ErrorKind::cuda));
    EXPECT_TRUE(throws_error([] { (void)Array::pinned({4}, dtypes::float32); }, ErrorKind::cuda));
}

TEST(Array, CudaAndPinnedOnAGpu) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device (runs on GPU machines)";
    const std::vector<float> host = {1.f, 2.f, 3.f, 4.f};
    Array d = Array::cuda({4}, dtypes::float32, 0);
    EXPECT_EQ(d.device(), Device::cuda(0));
    // The device the driver reports for the memory is the one the Array says.
    EXPECT_EQ(cuda::resolve_device(d.ptr(), d.byte_span(), std::nullopt), Device::cuda(0));
    cuda::Driver& drv = cuda::driver();
    const cuda::ContextGuard on_device(drv, 0);  // the synchronous copies below run in a context
    const auto address = static_cast<cuda::CUdeviceptr>(reinterpret_cast<std::uintptr_t>(d.ptr()));
    drv.call("cuMemcpyHtoD", drv.api().memcpy_htod, address, static_cast<const void*>(host.data()), sizeof(float) * 4);
    std::vector<float> back(4);
    drv.call("cuMemcpyDtoH", drv.api().memcpy_dtoh, static_cast<void*>(back.data()), address, sizeof(float) * 4);
    EXPECT_EQ(back, host);

    Array p = Array::pinned({2, 2}, dtypes::float32);
    EXPECT_EQ(p.device(), Device::cuda_host());
    EXPECT_EQ(cuda::resolve_device(p.ptr(), p.byte_span(), std::nullopt), Device::cuda_host());
    p.as<float, 2>()(1, 1) = 5.f;  // host-addressable
    EXPECT_EQ((p.as<const float, 2>()(1, 1)), 5.f);
    EXPECT_TRUE(throws_error([] { (void)Array::cuda({4}, dtypes::float32, cuda::device_count()); }, ErrorKind::value,
                             "no CUDA device"));
}

}  // namespace
}  // namespace stridex
