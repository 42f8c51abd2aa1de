// stridex.Dtype and stridex.Device: thin faces over the C++ value types.
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include "arguments.hpp"
#include "attributes.hpp"
#include "bindings.hpp"
#include "stridex/device.hpp"
#include "stridex/dtype.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;

namespace stridex::python {

namespace {

// The NumPy dtype for a stridex dtype: a typestr where NumPy has one, else the ml_dtypes type of
// the same name (bfloat16, float8_*, float6_*, float4_*, int4 ...).
nb::object numpy_dtype(Dtype d) {
    nb::module_ numpy = nb::module_::import_("numpy");
    if ((d.lanes == 1 && !d.is_subbyte() && d.code != DtypeCode::kBfloat && d.code <= DtypeCode::kBool &&
         d.code != DtypeCode::kOpaqueHandle) ||
        d.is_opaque_bytes())
        return numpy.attr("dtype")(d.typestr());  // opaque bytes: NumPy's void of that size
    nb::object ml_dtypes = nb::steal(PyImport_ImportModule("ml_dtypes"));
    if (!ml_dtypes.is_valid()) {
        clear_exception_or_throw();  // not installed (or broken): say what to do; Ctrl-C propagates
        fail(ErrorKind::type, "NumPy has no ", d.name(), " dtype; install ml_dtypes for it");
    }
    nb::object type = nb::steal(PyObject_GetAttrString(ml_dtypes.ptr(), d.name().c_str()));
    if (!type.is_valid()) {
        clear_exception_or_throw();
        fail(ErrorKind::type, "neither NumPy nor ml_dtypes has a ", d.name(), " dtype");
    }
    return numpy.attr("dtype")(type);
}

bool dtype_equals(Dtype d, nb::handle other) {
    if (nb::isinstance<Dtype>(other)) return d == nb::cast<Dtype>(other);
    if (nb::isinstance<nb::str>(other)) return d.name() == nb::cast<std::string_view>(other);
    return false;
}

bool device_equals(Device d, nb::handle other) {
    if (nb::isinstance<Device>(other)) return d == nb::cast<Device>(other);
    if (nb::isinstance<nb::str>(other)) return d.name() == nb::cast<std::string_view>(other);
    return false;
}

}  // namespace

void bind_types(nb::module_& m) {
    // The dtype parser itself (arguments.cpp's dtype_arg), as every other entry uses it.
    m.def(
        "dtype", [](nb::handle spec) { return dtype_arg(spec.ptr(), "dtype(): spec"); }, nb::arg("spec").none(),
        nb::sig("def dtype(spec: _DtypeLike) -> Dtype"),
        "A stridex Dtype from any dtype spelling stridex takes, the same at every entry (empty, from_pointer, "
        "Dtype(), VirtualBuffer.view): a Dtype, a name ('float32', 'torch.float32'), a NumPy, ml_dtypes or "
        "torch dtype or scalar type (np.float32, ml_dtypes.bfloat16, float), an array (its dtype), or any other "
        "text NumPy takes ('<f4'). TypeError for anything else; ValueError for non-native byte order.");
    nb::class_<Dtype>(m, "Dtype", "An element type: DLPack type code, bits and lanes, with a canonical name.")
        .def(nb::new_([](nb::handle spec) { return dtype_arg(spec.ptr(), "Dtype(): spec"); }), nb::arg("spec").none(),
             "The Dtype of any dtype spelling stridex takes (stridex.dtype()).")
        .def_static(
            "from_dlpack",
            [](nb::handle code_arg, nb::handle bits_arg, nb::handle lanes_arg) {
                const std::int64_t code = int64_arg(code_arg.ptr(), "Dtype.from_dlpack(): code");
                const std::int64_t bits = int64_arg(bits_arg.ptr(), "Dtype.from_dlpack(): bits");
                const std::int64_t lanes = int64_arg(lanes_arg.ptr(), "Dtype.from_dlpack(): lanes");
                if (code < 0 || code > 255 || bits < 0 || bits > 255 || lanes < 0 || lanes > 65535)
                    fail(ErrorKind::value, "DLPack dtype fields out of range: code ", code, ", bits ", bits, ", lanes ",
                         lanes);
                return Dtype::from_raw(static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits),
                                       static_cast<std::uint16_t>(lanes));
            },
            nb::arg("code"), nb::arg("bits"), nb::arg("lanes") = 1,
            nb::sig("def from_dlpack(code: typing.SupportsIndex, bits: typing.SupportsIndex, lanes: "
                    "typing.SupportsIndex = 1) -> Dtype"))
        .def_static("from_typestr", &Dtype::from_typestr, nb::arg("typestr"))
        .def_static("from_buffer_format", &Dtype::from_buffer_format, nb::arg("format"))
        .def_prop_ro("name", &Dtype::name)
        .def_prop_ro("code", [](Dtype d) { return static_cast<int>(d.code); })
        .def_prop_ro("bits", [](Dtype d) { return static_cast<int>(d.bits); })
        .def_prop_ro("lanes", [](Dtype d) { return static_cast<int>(d.lanes); })
        .def_prop_ro("itemsize", &Dtype::itemsize)
        .def_prop_ro("typestr", &Dtype::typestr)
        .def_prop_ro("buffer_format", &Dtype::buffer_format)
        .def_prop_ro("numpy", &numpy_dtype, nb::sig("def numpy(self) -> numpy.dtype[typing.Any]"),
                     "The equivalent NumPy dtype (ml_dtypes for bfloat16 and float8/6/4).")
        .def("__eq__", &dtype_equals)
        .def("__hash__", [](Dtype d) { return nb::hash(nb::str(d.name().c_str())); })
        .def("__str__", &Dtype::name)
        .def("__repr__", [](Dtype d) { return "stridex.Dtype('" + d.name() + "')"; });

    nb::class_<Device>(m, "Device", "A DLPack device: type and ordinal, printed as 'cpu', 'cuda:0', 'cuda_host' ...")
        .def(nb::new_([](nb::handle spec) {
                 return device_arg(spec.ptr(), "Device(): spec", /*ints_are_cuda_ordinals=*/false);
             }),
             nb::arg("spec").none(),
             "The Device of any device spelling stridex takes: a Device, a name such as 'cuda:0', or a DLPack "
             "(device_type, device_id) pair.")
        .def_static(
            "from_dlpack",
            [](nb::handle type, nb::handle id) {
                return Device::from_raw(int32_arg(type.ptr(), "Device.from_dlpack(): device_type"),
                                        int32_arg(id.ptr(), "Device.from_dlpack(): device_id"));
            },
            nb::arg("device_type"), nb::arg("device_id") = 0,
            nb::sig(
                "def from_dlpack(device_type: typing.SupportsIndex, device_id: typing.SupportsIndex = 0) -> Device"))
        .def_prop_ro("type", [](Device d) { return std::string(device_type_name(d.type)); })
        .def_prop_ro("type_code", [](Device d) { return static_cast<int>(d.type); })
        .def_prop_ro("id", [](Device d) { return d.id; })
        .def_prop_ro("host_accessible", &Device::host_accessible)
        .def_prop_ro("cuda_accessible", &Device::is_cuda_family)
        .def_prop_ro(
            "dlpack", [](Device d) { return nb::make_tuple(static_cast<int>(d.type), d.id); },
            nb::sig("def dlpack(self) -> tuple[int, int]"), "The (device_type, device_id) pair of __dlpack_device__.")
        .def("__eq__", &device_equals)
        .def("__hash__", [](Device d) { return nb::hash(nb::str(d.name().c_str())); })
        .def("__str__", &Device::name)
        .def("__repr__", [](Device d) { return "stridex.Device('" + d.name() + "')"; });
}

}  // namespace stridex::python
