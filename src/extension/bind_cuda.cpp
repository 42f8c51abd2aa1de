// The Python face of the CUDA layer: cuda_available, device_count, pointer_info, and the argument
// conversions that DevicePtr (bind_device_ptr.cpp) and VirtualBuffer (bind_virtual_buffer.cpp)
// share. All rules live in C++ (include/stridex/cuda/); these files convert arguments.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "cuda_arguments.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/pointer.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {

using cuda::DevicePtr;

// ---- Integers -------------------------------------------------------------------------------------

// The Python int behind an operand of DevicePtr arithmetic and comparisons, or an empty object
// when `h` is no integer (floats included: Python then answers NotImplemented's TypeError).
nb::object as_python_int(nb::handle h) {
    PyObject* o = h.ptr();
    if (PyLong_Check(o)) return nb::borrow(h);
    if (PyFloat_Check(o) || !PyIndex_Check(o)) return {};
    nb::object i = nb::steal(PyNumber_Index(o));
    if (!i.is_valid()) throw nb::python_error();
    return i;
}

std::size_t to_size(std::int64_t v, const char* what) {
    if (v < 0) fail(ErrorKind::value, what, " must be >= 0, found ", v);
    return static_cast<std::size_t>(v);
}

// ---- Devices and dtypes ----------------------------------------------------------------------------

// A CUDA ordinal from an int, a stridex.Device ("cuda:N") or a string naming one.
int cuda_ordinal(nb::handle h) {
    Device d;
    if (nb::isinstance<Device>(h))
        d = nb::cast<Device>(h);
    else if (nb::isinstance<nb::str>(h))
        d = Device::parse(nb::cast<std::string>(h));
    else if (nb::object i = as_python_int(h); i.is_valid() && !PyBool_Check(h.ptr()))
        d = Device::cuda(int32_arg(i.ptr(), "a CUDA device ordinal"));
    else
        fail(ErrorKind::type, "expected a CUDA device (an ordinal, 'cuda:N' or a stridex.Device), found ", type_name(h.ptr()));
    if (d.type != DeviceType::kCUDA) fail(ErrorKind::value, "expected a CUDA device, found ", d.name());
    if (d.id < 0) fail(ErrorKind::value, "a CUDA device ordinal must be >= 0, found ", d.id);
    return d.id;
}

// A stridex Device for DevicePtr(..., device=...): any device; an int is a CUDA ordinal.
Device device_arg(nb::handle h) {
    if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
    if (nb::isinstance<nb::str>(h)) return Device::parse(nb::cast<std::string>(h));
    return Device::cuda(cuda_ordinal(h));
}

namespace {

// ---- pointer_info ----------------------------------------------------------------------------------

void bind_pointer_info(nb::module_& m) {
    using cuda::PointerInfo;
    nb::class_<PointerInfo>(m, "PointerInfo", "What the CUDA driver knows about an address.")
        .def_prop_ro("memory_type", [](const PointerInfo& i) { return std::string(cuda::to_string(i.memory_type)); },
                     "'host' (unknown to CUDA), 'pinned_host', 'device' or 'managed'")
        .def_prop_ro("device", &PointerInfo::device, "cuda:N, cuda_host, cuda_managed or cpu")
        .def_prop_ro("device_ordinal", [](const PointerInfo& i) { return i.device_ordinal; },
                     "the driver's device ordinal; -1 for host memory")
        .def_prop_ro(
            "base",
            [](const PointerInfo& i) -> nb::object {
                if (i.memory_type == cuda::MemoryType::host) return nb::none();
                return nb::cast(DevicePtr(i.base, i.device()));
            },
            nb::sig("def base(self) -> DevicePtr | None"),
            "start of the allocation (for VMM memory: of the reserved range); None for host memory")
        .def_prop_ro("size", [](const PointerInfo& i) { return i.size; }, "bytes of that range; 0 for host memory")
        .def_prop_ro("host_accessible", [](const PointerInfo& i) { return i.host_accessible; })
        .def("__repr__", [](const PointerInfo& i) {
            return "PointerInfo(memory_type='" + std::string(cuda::to_string(i.memory_type)) + "', device=" +
                   i.device().name() + ", base=" + hex(i.base) + ", size=" + std::to_string(i.size) + ")";
        });

    m.def("pointer_info", [](nb::handle ptr) { return cuda::pointer_info(address_arg(ptr.ptr(), "pointer_info(): ptr")); },
          "ptr"_a, nb::sig("def pointer_info(ptr: typing.SupportsIndex | typing.SupportsInt) -> PointerInfo"),
          "Memory type, device, allocation range and host accessibility of an address (one "
          "cuPointerGetAttributes call). Without a CUDA driver every address is 'host'.");
}

}  // namespace

void bind_cuda(nb::module_& m) {
    m.def("cuda_available", &cuda::cuda_available,
          "True when the CUDA driver (libcuda.so.1) loads, initialises and sees a device. Never raises.");
    m.def("device_count", &cuda::device_count, "CUDA devices the driver sees; 0 without a driver. Never raises.");
    bind_device_ptr(m);
    bind_pointer_info(m);
    bind_virtual_buffer(m);
}

}  // namespace stridex::python
