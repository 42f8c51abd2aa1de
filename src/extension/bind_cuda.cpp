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

#include "bindings.hpp"
#include "cuda_arguments.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/pointer.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {

using cuda::DevicePtr;

std::string name_of_type(nb::handle h) { return nb::type_name(h.type()).c_str(); }

// ---- Integers -------------------------------------------------------------------------------------

// The Python int behind `h`, or an empty object when `h` is no integer. `allow_int_protocol`
// also accepts objects with only __int__: cuda.bindings' CUdeviceptr has __int__ but no
// __index__. Floats have __int__ too and are refused: an address is never a float.
nb::object as_python_int(nb::handle h, bool allow_int_protocol) {
    PyObject* o = h.ptr();
    if (PyLong_Check(o)) return nb::borrow(h);
    if (PyFloat_Check(o)) return {};
    if (PyIndex_Check(o)) return nb::steal(PyNumber_Index(o));
    if (allow_int_protocol && Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_int) {
        nb::object i = nb::steal(PyNumber_Long(o));
        if (!i.is_valid()) throw nb::python_error();
        return i;
    }
    return {};
}

// An int as a 64-bit address; ValueError outside [0, 2^64).
std::uint64_t to_address(nb::handle i) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    if (overflow == 0 && v >= 0) return static_cast<std::uint64_t>(v);
    if (overflow > 0) {
        const unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
        if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) return u;
        PyErr_Clear();
    }
    fail(ErrorKind::value, "a device address must be in [0, 2**64), found ", nb::str(i).c_str());
}

// An address from a DevicePtr, an int, or anything with __index__ or __int__.
std::uint64_t address_of(nb::handle h) {
    if (nb::isinstance<DevicePtr>(h)) return nb::cast<const DevicePtr&>(h).address();
    nb::object i = as_python_int(h, true);
    if (!i.is_valid())
        fail(ErrorKind::type, "expected an address (an int, a stridex.DevicePtr, or an object with __index__ or "
                              "__int__ such as cuda.bindings CUdeviceptr), found ",
             name_of_type(h));
    return to_address(i);
}

std::int32_t to_int32(nb::handle i, const char* what) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (v == -1 && PyErr_Occurred()) throw nb::python_error();
    if (overflow != 0 || v < INT32_MIN || v > INT32_MAX)
        fail(ErrorKind::value, what, " must fit in 32 bits, found ", nb::str(i).c_str());
    return static_cast<std::int32_t>(v);
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
    else if (nb::object i = as_python_int(h, false); i.is_valid() && !PyBool_Check(h.ptr()))
        d = Device::cuda(to_int32(i, "a CUDA device ordinal"));
    else
        fail(ErrorKind::type, "expected a CUDA device (an ordinal, 'cuda:N' or a stridex.Device), found ", name_of_type(h));
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

// A Dtype from a stridex.Dtype, a name ("float32"), a torch dtype (str "torch.float32"), or
// anything numpy.dtype() takes (np.float32, np.dtype("f4"), "<f4").
Dtype dtype_arg(nb::handle h) {
    if (nb::isinstance<Dtype>(h)) return nb::cast<Dtype>(h);
    if (nb::isinstance<nb::str>(h)) {
        const std::string name = nb::cast<std::string>(h);
        if (name.find_first_of("<>|=") == std::string::npos) return Dtype::from_name(name);
    }
    const std::string text = nb::cast<std::string>(nb::str(h));
    if (text.rfind("torch.", 0) == 0) return Dtype::from_name(text.substr(6));
    try {
        nb::object numpy_dtype = nb::module_::import_("numpy").attr("dtype")(h);
        return Dtype::from_name(nb::cast<std::string>(numpy_dtype.attr("name")));
    } catch (const nb::python_error&) {
        fail(ErrorKind::type, "expected a dtype (a stridex.Dtype, a name such as 'float32', a NumPy or torch dtype), found ",
             text);
    }
}

std::vector<std::int64_t> shape_arg(nb::handle h) {
    auto extent = [](nb::handle e) {
        nb::object i = as_python_int(e, false);
        if (!i.is_valid()) fail(ErrorKind::type, "shape entries must be ints, found ", name_of_type(e));
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
        if (v == -1 && PyErr_Occurred()) throw nb::python_error();
        if (overflow != 0) fail(ErrorKind::value, "shape entry ", nb::str(i).c_str(), " does not fit in 64 bits");
        return static_cast<std::int64_t>(v);
    };
    if (as_python_int(h, false).is_valid()) return {extent(h)};
    std::vector<std::int64_t> shape;
    for (nb::handle e : h) shape.push_back(extent(e));
    return shape;
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

    m.def("pointer_info", [](nb::handle ptr) { return cuda::pointer_info(static_cast<std::uintptr_t>(address_of(ptr))); },
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
