// stridex.Dtype and stridex.Device: thin faces over the C++ value types.
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include "common/arguments.hpp"
#include "common/attributes.hpp"
#include "common/bindings.hpp"
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

// Equality takes every spelling the entry points take, through the same parsers, so that
// `v.dtype == np.float32`, `== 'f4'` and `v.device == 'cuda:0'` mean what they mean to empty() or
// to(). Text that is no dtype or device raises the parser's error: a typo ('flaot32', 'cude:0')
// must not read as "a different dtype". Objects of no dtype kind at all (None, 3, a list) are
// Python's unrelated types: NotImplemented, so == is False and containers mixing them still work.
// The hash is the canonical name's (Dtype('float32') is found as 'float32' in a dict); other
// spellings cannot all share one hash, as for NumPy dtypes (docs/api.md, "Dtypes and devices").
nb::object dtype_equals(Dtype d, nb::handle other) {
    if (nb::isinstance<Dtype>(other)) return nb::bool_(d == nb::cast<Dtype>(other));
    if (nb::isinstance<nb::str>(other)) return nb::bool_(d == dtype_arg(other.ptr(), "Dtype.__eq__(): other"));
    try {
        return nb::bool_(d == dtype_arg(other.ptr(), "Dtype.__eq__(): other"));
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::type) throw;  // a dtype stridex refuses ('>f4'): the parser's words
        return nb::borrow(Py_NotImplemented);
    }
}

nb::object device_equals(Device d, nb::handle other) {
    if (nb::isinstance<Device>(other)) return nb::bool_(d == nb::cast<Device>(other));
    // Names and (device_type, device_id) pairs, as device= takes them; ints are no device there.
    if (nb::isinstance<nb::str>(other) || nb::isinstance<nb::tuple>(other))
        return nb::bool_(d == device_arg(other.ptr(), "Device.__eq__(): other", /*ints_are_cuda_ordinals=*/false));
    return nb::borrow(Py_NotImplemented);
}

}  // namespace

void bind_types(nb::module_& m) {
    // The dtype parser itself (arguments.cpp's dtype_arg), as every other entry uses it.
    m.def(
        "dtype", [](nb::handle spec) { return dtype_arg(spec.ptr(), "dtype(): spec"); }, nb::arg("spec").none(),
        nb::sig("def dtype(spec: stridex.typing.DtypeLike) -> Dtype"),
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
                    "typing.SupportsIndex = 1) -> Dtype"),
            "The Dtype of DLPack's (code, bits, lanes) fields, as a DLTensor carries them.")
        .def_static("from_typestr", &Dtype::from_typestr, nb::arg("typestr"),
                    "The Dtype of an array interface typestr ('<f4', '|b1').")
        .def_static("from_buffer_format", &Dtype::from_buffer_format, nb::arg("format"),
                    "The Dtype of a buffer protocol (PEP 3118) format ('f', '<i8', '?').")
        .def_prop_ro("name", &Dtype::name, "The canonical name: 'float32', 'bfloat16', 'float32x4' ...")
        .def_prop_ro(
            "code", [](Dtype d) { return static_cast<int>(d.code); },
            "DLPack's type code (0 int, 1 uint, 2 float ...).")
        .def_prop_ro(
            "bits", [](Dtype d) { return static_cast<int>(d.bits); }, "Bits of one lane.")
        .def_prop_ro(
            "lanes", [](Dtype d) { return static_cast<int>(d.lanes); }, "Lanes per element (> 1 for vector types).")
        .def_prop_ro("itemsize", &Dtype::itemsize, "Bytes of one element (rounded up for sub-byte types).")
        .def_prop_ro("typestr", &Dtype::typestr, "The array interface typestr ('<f4').")
        .def_prop_ro("buffer_format", &Dtype::buffer_format, "The buffer protocol format ('f').")
        .def_prop_ro("numpy", &numpy_dtype, nb::sig("def numpy(self) -> numpy.dtype[typing.Any]"),
                     "The equivalent NumPy dtype (ml_dtypes for bfloat16 and float8/6/4).")
        .def("__eq__", &dtype_equals, nb::arg("other").none(), nb::sig("def __eq__(self, other: object, /) -> bool"),
             "True when `other` names this dtype in any spelling stridex takes (a Dtype, 'float32', 'f4', "
             "np.float32, a NumPy or torch dtype, an array); text that is no dtype raises as stridex.dtype() does.")
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
                "def from_dlpack(device_type: typing.SupportsIndex, device_id: typing.SupportsIndex = 0) -> Device"),
            "The Device of DLPack's (device_type, device_id) fields, as __dlpack_device__ returns them.")
        .def_prop_ro(
            "type", [](Device d) { return std::string(device_type_name(d.type)); },
            "The type's name: 'cpu', 'cuda', 'cuda_host', 'cuda_managed', 'rocm' ...")
        .def_prop_ro(
            "type_code", [](Device d) { return static_cast<int>(d.type); }, "DLPack's device type (1 cpu, 2 cuda ...).")
        .def_prop_ro(
            "id", [](Device d) { return d.id; }, "The ordinal (0 for the single-instance types: cpu, cuda_host ...).")
        .def_prop_ro("host_accessible", &Device::host_accessible, "True when the CPU may dereference the memory.")
        .def_prop_ro("cuda_accessible", &Device::is_cuda_family,
                     "True for memory the CUDA driver owns (cuda, cuda_host, cuda_managed).")
        .def_prop_ro(
            "dlpack", [](Device d) { return nb::make_tuple(static_cast<int>(d.type), d.id); },
            nb::sig("def dlpack(self) -> tuple[int, int]"), "The (device_type, device_id) pair of __dlpack_device__.")
        .def("__eq__", &device_equals, nb::arg("other").none(), nb::sig("def __eq__(self, other: object, /) -> bool"),
             "True when `other` names this device in any spelling stridex takes (a Device, 'cpu', 'cpu:0', "
             "'cuda:0', a (device_type, device_id) pair); text that is no device raises as Device() does.")
        .def("__hash__", [](Device d) { return nb::hash(nb::str(d.name().c_str())); })
        .def("__str__", &Device::name)
        .def("__repr__", [](Device d) { return "stridex.Device('" + d.name() + "')"; });
}

}  // namespace stridex::python
