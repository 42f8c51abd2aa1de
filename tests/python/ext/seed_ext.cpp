// The seed case (the "GPU arrays returned as CPU arrays" bug report) as an extension author writes it with stridex: memory allocated in C++
// (new[] on the host, cuMemAlloc on a GPU) is wrapped WITHOUT saying where it lives, returned as
// stridex::View, and must reach every consumer on the right device. Also the other direction:
// functions taking stridex::View arguments.
#include <dlfcn.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <vector>

#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/from_pointer.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/python/nanobind.hpp"

namespace nb = nanobind;
using namespace stridex;

namespace {

Layout vector_layout(std::int64_t n) {
    const std::int64_t shape[] = {n};
    return Layout::contiguous(shape);
}

// ---- host --------------------------------------------------------------------------------------

View cpu_iota(std::int64_t n) {
    auto* data = new float[static_cast<std::size_t>(n)];
    std::iota(data, data + n, 0.f);
    Owner owner = Owner::from_callback([](void* p) noexcept { delete[] static_cast<float*>(p); }, data);
    return cuda::view_of_pointer(data, vector_layout(n), dtypes::float32, std::nullopt, std::move(owner));
}

// A rows x cols matrix handed out transposed and, on request, read-only.
View cpu_matrix_t(std::int64_t rows, std::int64_t cols, bool readonly) {
    auto* data = new double[static_cast<std::size_t>(rows * cols)];
    std::iota(data, data + rows * cols, 0.0);
    Owner owner = Owner::from_callback([](void* p) noexcept { delete[] static_cast<double*>(p); }, data);
    const std::int64_t shape[] = {rows, cols};
    return cuda::view_of_pointer(data, Layout::contiguous(shape), dtypes::float64, std::nullopt, std::move(owner),
                                 readonly)
        .transpose();
}

// The seed bug by hand: host memory labelled as GPU memory.
View cpu_labelled_cuda(std::int64_t n) {
    auto* data = new float[static_cast<std::size_t>(n)]();
    Owner owner = Owner::from_callback([](void* p) noexcept { delete[] static_cast<float*>(p); }, data);
    return View(data, 0, vector_layout(n), dtypes::float32, Device::cuda(0), /*readonly=*/false, std::move(owner));
}

// ---- GPU: cuMemAlloc / cuMemFree straight from the driver ----------------------------------------

struct CudaAlloc {
    cuda::CUresult (*alloc)(cuda::CUdeviceptr*, std::size_t) = nullptr;
    cuda::CUresult (*free)(cuda::CUdeviceptr) = nullptr;
};

const CudaAlloc& cuda_alloc() {
    static const CudaAlloc a = [] {
        CudaAlloc out;
        if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
            out.alloc = reinterpret_cast<decltype(out.alloc)>(dlsym(lib, "cuMemAlloc_v2"));
            out.free = reinterpret_cast<decltype(out.free)>(dlsym(lib, "cuMemFree_v2"));
        }
        return out;
    }();
    if (!a.alloc || !a.free) fail(ErrorKind::cuda, "cuMemAlloc_v2 not found in libcuda.so.1");
    return a;
}

struct DeviceBlock {
    cuda::CUdeviceptr ptr;
    int ordinal;
};

void free_device_block(void* p) noexcept {
    auto* block = static_cast<DeviceBlock*>(p);
    try {
        const cuda::ContextGuard guard(block->ordinal);
        cuda_alloc().free(block->ptr);
    } catch (...) {  // the driver is gone (exit): nothing left to free
    }
    delete block;
}

// n float32 values 0, 1, 2 ... in cuMemAlloc memory of `ordinal`; returns the pointer and an owner.
std::pair<void*, Owner> device_iota(std::int64_t n, int ordinal) {
    const cuda::ContextGuard guard(ordinal);
    cuda::CUdeviceptr ptr = 0;
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
    if (cuda_alloc().alloc(&ptr, bytes) != 0) fail(ErrorKind::cuda, "cuMemAlloc failed");
    Owner owner = Owner::from_callback(&free_device_block, new DeviceBlock{ptr, ordinal});
    std::vector<float> host(static_cast<std::size_t>(n));
    std::iota(host.begin(), host.end(), 0.f);
    cuda::Driver& d = cuda::driver();
    d.call("cuMemcpyHtoD", d.api().memcpy_htod, ptr, host.data(), bytes);
    return {reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr)), std::move(owner)};
}

// THE seed case: GPU memory wrapped without a device argument.
View gpu_iota(std::int64_t n, int ordinal) {
    auto [ptr, owner] = device_iota(n, ordinal);
    return cuda::view_of_pointer(ptr, vector_layout(n), dtypes::float32, std::nullopt, std::move(owner));
}

// The seed bug by hand: GPU memory labelled `device` (cpu, or another ordinal) with View's raw
// constructor. The caster must refuse to hand it to Python.
View gpu_mislabelled(std::int64_t n, int ordinal, const std::string& device) {
    auto [ptr, owner] = device_iota(n, ordinal);
    return View(ptr, 0, vector_layout(n), dtypes::float32, Device::parse(device), /*readonly=*/false, std::move(owner));
}

// GPU memory whose contents are still pending on a stream of ours: the Python View must say so.
View gpu_pending(std::int64_t n, int ordinal) {
    static std::mutex mutex;
    static std::vector<cuda::Stream>* streams = new std::vector<cuda::Stream>();  // live for the process
    View v = gpu_iota(n, ordinal);
    const std::lock_guard lock(mutex);
    streams->push_back(cuda::Stream::create(ordinal));
    v.set_stream(streams->back().ref().encoded());
    return v;
}

// ---- Python -> C++ -------------------------------------------------------------------------------

nb::dict describe(const View& v) {
    nb::dict d;
    d["device_type"] = static_cast<int>(v.device().type);
    d["device_id"] = v.device().id;
    d["ptr"] = reinterpret_cast<std::uintptr_t>(v.ptr());
    d["shape"] = std::vector<std::int64_t>(v.shape().begin(), v.shape().end());
    d["strides"] = std::vector<std::int64_t>(v.strides().begin(), v.strides().end());
    d["dtype"] = v.dtype().name();
    d["readonly"] = v.readonly();
    d["stream"] = static_cast<std::int64_t>(v.stream());
    return d;
}

// Sum of a 1-d float32 view, wherever it lives (a device copy for CUDA memory).
double sum(const View& v) {
    if (v.dtype() != dtypes::float32 || v.ndim() != 1) fail(ErrorKind::type, "sum takes 1-d float32");
    std::vector<float> host(static_cast<std::size_t>(v.size()));
    if (v.device().host_accessible()) {
        auto a = v.as<const float, 1>();
        for (std::int64_t i = 0; i < v.size(); ++i) host[static_cast<std::size_t>(i)] = a(i);
    } else {
        if (v.strides()[0] != 1) fail(ErrorKind::value, "sum of device memory takes contiguous views");
        const cuda::ContextGuard guard(v.device().id);
        cuda::Driver& d = cuda::driver();
        if (v.stream() != kNoStream) cuda::Stream::borrow(cuda::StreamRef(v.stream()), v.device().id).synchronize();
        d.call("cuMemcpyDtoH", d.api().memcpy_dtoh, host.data(),
               static_cast<cuda::CUdeviceptr>(reinterpret_cast<std::uintptr_t>(v.ptr())),
               static_cast<std::size_t>(v.nbytes()));
    }
    return std::accumulate(host.begin(), host.end(), 0.0);
}

void fill(const View& v, float value) {
    auto a = v.as<float, 1>();  // refuses read-only views
    if (!v.device().host_accessible()) fail(ErrorKind::value, "fill writes host memory only");
    for (std::int64_t i = 0; i < v.size(); ++i) a(i) = value;
}

View identity(const View& v) { return v; }

// ---- The caster's path (caster_core.hpp): the wheel's caster API, or the Python fallback ---------

const char* caster_path() { return interop::link()->caster_api ? "caster API" : "Python"; }

// The slot the casters import arguments through: "import_array" (caster API minor >= 1),
// "import_tensor" (a minor-0 table) or "stridex.view" (the Python path).
const char* caster_slot() {
    const python::CasterApi* api = interop::link()->caster_api;
    if (!api) return "stridex.view";
    return interop::import_array_of(*api) ? "import_array" : "import_tensor";
}

// The stream an argument arrives on when it asks for the caller's (arg::caller_stream).
std::int64_t caller_stream(Arg<arg::caller_stream> x) { return static_cast<std::int64_t>(x.stream()); }

// Installs the caster API in `capsule` as link() would find it (None: none), so that the fallback
// and the version check can be tested; returns whether the casters took it.
bool use_caster_api(nb::handle capsule) {
    interop::Link* l = interop::link();
    l->caster_api = capsule.is_none() ? nullptr : interop::caster_api_of(capsule.ptr());
    return l->caster_api != nullptr;
}

}  // namespace

NB_MODULE(stridex_seed_ext, m) {
    // As docs/extensions.md tells extension authors: without it a stridex::Error thrown here is
    // nanobind's RuntimeError, unless another module of the same nanobind ABI (a wheel built by the
    // same compiler and C++ library) happens to have registered its own translator.
    stridex::register_error_translator();
    m.def("cpu_iota", &cpu_iota, nb::arg("n"));
    m.def("cpu_matrix_t", &cpu_matrix_t, nb::arg("rows"), nb::arg("cols"), nb::arg("readonly") = false);
    m.def("cpu_labelled_cuda", &cpu_labelled_cuda, nb::arg("n"));
    m.def("gpu_iota", &gpu_iota, nb::arg("n"), nb::arg("ordinal") = 0);
    m.def("gpu_mislabelled", &gpu_mislabelled, nb::arg("n"), nb::arg("ordinal"), nb::arg("device"));
    m.def("gpu_pending", &gpu_pending, nb::arg("n"), nb::arg("ordinal") = 0);
    m.def("describe", &describe, nb::arg("view"));
    m.def("sum", &sum, nb::arg("view"));
    m.def("fill", &fill, nb::arg("view"), nb::arg("value"));
    m.def("identity", &identity, nb::arg("view"));
    m.def("identity_strict", &identity, nb::arg("view").noconvert());
    m.def("caster_path", &caster_path);
    m.def("caster_slot", &caster_slot);
    m.def("caller_stream", &caller_stream, nb::arg("x"));
    m.def("use_caster_api", &use_caster_api, nb::arg("capsule").none());
}
