// Arguments from Python: the one home of the conversions (see arguments.hpp).
#include "common/arguments.hpp"

#include <cctype>
#include <cstring>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "common/attributes.hpp"
#include "common/limited_api.hpp"
#include "common/names.hpp"
#include "stridex/error.hpp"
#include "stridex/layout.hpp"

namespace nb = nanobind;

namespace stridex::python {

namespace {

bool is_integer(PyObject* o) noexcept { return !PyBool_Check(o) && !PyFloat_Check(o) && PyIndex_Check(o); }

// The Python int behind an integer argument (a new reference); TypeError naming `what` otherwise.
nb::object python_int(PyObject* o, const char* what) {
    if (PyLong_CheckExact(o)) return nb::borrow(o);
    if (!is_integer(o)) fail(ErrorKind::type, what, " must be an int, found ", type_name(o));
    nb::object i = nb::steal(PyNumber_Index(o));
    if (!i.is_valid()) throw nb::python_error();
    return i;
}

// An integer argument: its Python int (for messages) and its value when that fits in int64.
struct IntArg {
    nb::object i;
    std::int64_t v = 0;
    bool fits_int64 = false;
};

IntArg int_arg(PyObject* o, const char* what) {
    IntArg a;
    a.i = python_int(o, what);
    int overflow = 0;
    a.v = PyLong_AsLongLongAndOverflow(a.i.ptr(), &overflow);
    if (a.v == -1 && PyErr_Occurred()) throw nb::python_error();
    a.fits_int64 = overflow == 0;
    return a;
}

}  // namespace

Excerpt type_name(PyObject* o) noexcept { return excerpt(type_tp_name(Py_TYPE(o))); }

std::string short_repr(PyObject* o, std::size_t limit) {
    nb::object r = nb::steal(PyObject_Repr(o));
    const char* text = r.is_valid() ? PyUnicode_AsUTF8(r.ptr()) : nullptr;
    if (!text) {
        clear_exception_or_throw();  // a repr that raises is no reason to hide a KeyboardInterrupt
        return "<" + std::string(type_name(o).text.substr(0, Excerpt::kLimit)) + " object>";
    }
    std::string out(text);
    if (out.size() > limit) {
        out.resize(limit);
        out += "...";
    }
    return out;
}

std::int64_t int64_arg(PyObject* o, const char* what) {
    const IntArg a = int_arg(o, what);
    if (!a.fits_int64) fail(ErrorKind::value, what, " ", short_repr(a.i.ptr()), " does not fit in int64");
    return a.v;
}

std::int32_t int32_arg(PyObject* o, const char* what) {
    const IntArg a = int_arg(o, what);
    if (!a.fits_int64 || a.v < INT32_MIN || a.v > INT32_MAX)
        fail(ErrorKind::value, what, " ", short_repr(a.i.ptr()), " does not fit in int32 (32 bits)");
    return static_cast<std::int32_t>(a.v);
}

int axis_arg(PyObject* o, int ndim, const char* what) {
    const IntArg a = int_arg(o, what);
    if (!a.fits_int64 || a.v < -ndim || a.v >= ndim)
        fail(ErrorKind::index, what, " ", short_repr(a.i.ptr()), " is out of range for ", ndim, " dimensions");
    return static_cast<int>(a.v);
}

std::int64_t index_arg(PyObject* o, const char* what) {
    const IntArg a = int_arg(o, what);
    if (!a.fits_int64) fail(ErrorKind::index, what, " ", short_repr(a.i.ptr()), " is out of range");
    return a.v;
}

std::uintptr_t address_arg(PyObject* o, const char* what) {
    nb::object i;
    if (is_integer(o)) {
        i = python_int(o, what);
    } else if (!PyBool_Check(o) && !PyFloat_Check(o) && PyType_GetSlot(Py_TYPE(o), Py_nb_int) != nullptr) {
        // Only __int__ (cuda.bindings' CUdeviceptr has no __index__); floats have one too, refused above.
        i = nb::steal(PyNumber_Long(o));
        if (!i.is_valid()) throw nb::python_error();
    } else {
        fail(ErrorKind::type, what, " must be an address (an int, or an object with __index__ or __int__), found ",
             type_name(o));
    }
    const unsigned long long v = PyLong_AsUnsignedLongLong(i.ptr());
    if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError) && !PyErr_ExceptionMatches(PyExc_ValueError))
            throw nb::python_error();
        PyErr_Clear();
        fail(ErrorKind::value, what, " must be an address in [0, 2**64), found ", short_repr(i.ptr()));
    }
    return static_cast<std::uintptr_t>(v);
}

std::size_t size_arg(PyObject* o, const char* what) {
    const std::int64_t v = int64_arg(o, what);
    if (v < 0) fail(ErrorKind::value, what, " must be >= 0, found ", v);
    return static_cast<std::size_t>(v);
}

Device device_arg(PyObject* o, const char* what, bool ints_are_cuda_ordinals) {
    nb::handle h(o);
    if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
    if (PyUnicode_Check(o)) {
        try {
            return Device::parse(nb::cast<std::string>(h));
        } catch (const Error& e) {
            fail(e.kind(), what, ": ", e.what());
        }
    }
    if (is_integer(o) && ints_are_cuda_ordinals) {  // as torch.device(0)
        const std::int32_t ordinal = int32_arg(o, what);
        if (ordinal < 0) fail(ErrorKind::value, what, ": device id must be >= 0, found ", ordinal, " for cuda");
        return Device::cuda(ordinal);
    }
    // The DLPack pair, a tuple as __dlpack_device__ returns it and __dlpack__(dl_device=) receives
    // it (the specification's type; a list is refused everywhere, dl_device included).
    if (PyTuple_Check(o)) {
        if (PyTuple_GET_SIZE(o) != 2)
            fail(ErrorKind::type, what, " must be a (device_type, device_id) pair, found a tuple of ",
                 PyTuple_GET_SIZE(o), " items");
        const std::string name(what);
        const std::int32_t type = int32_arg(PyTuple_GET_ITEM(o, 0), (name + "[0]").c_str());
        const std::int32_t id = int32_arg(PyTuple_GET_ITEM(o, 1), (name + "[1]").c_str());
        try {
            // An unknown type is a BufferError (DLPack may add types: unservable, not malformed),
            // a negative id a ValueError: the core's rule, whatever the entry (docs/import.md).
            return Device::from_pair(type, id);
        } catch (const Error& e) {
            fail(e.kind(), what, ": ", e.what());
        }
    }
    fail(ErrorKind::type, what, " must be a device (a stridex.Device, a name such as 'cuda:0', ",
         ints_are_cuda_ordinals ? "a CUDA ordinal " : "", "or a (device_type, device_id) pair), found ", type_name(o));
}

int cuda_ordinal_arg(PyObject* o, const char* what) {
    const Device d = device_arg(o, what, /*ints_are_cuda_ordinals=*/true);
    if (d.type != DeviceType::kCUDA) fail(ErrorKind::value, what, " must be a CUDA device, found ", d.name());
    return d.id;
}

std::vector<std::int64_t> int64_list_arg(PyObject* o, const char* what) {
    if (is_integer(o)) return {int64_arg(o, what)};  // a bare int is one axis, as in NumPy
    if (PyUnicode_Check(o) || PyBytes_Check(o) || !PySequence_Check(o))
        fail(ErrorKind::type, what, " must be an int or a sequence of ints, found ", type_name(o));
    nb::object items = nb::steal(PySequence_Fast(o, what));
    if (!items.is_valid()) throw nb::python_error();
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(items.ptr());
    if (n > kMaxNdim) fail(ErrorKind::value, what, " has ", n, " entries; at most ", kMaxNdim, " dimensions");
    std::vector<std::int64_t> out(static_cast<std::size_t>(n));
    for (Py_ssize_t k = 0; k < n; ++k)
        out[static_cast<std::size_t>(k)] = int64_arg(PySequence_Fast_GET_ITEM(items.ptr(), k), what);
    return out;
}

namespace {

[[noreturn]] void fail_not_dtype(PyObject* o, const char* what) {
    fail(ErrorKind::type, what,
         " must be a dtype (a stridex.Dtype, a name such as 'float32' or 'torch.float32', a "
         "NumPy, ml_dtypes or torch dtype or scalar type, or an array), found ",
         short_repr(o));
}

// An error of the core's parsers, with the argument named.
[[noreturn]] void rethrow_named(const Error& e, const char* what) { fail(e.kind(), what, ": ", e.what()); }

// numpy.dtype(o) (a new reference), or an invalid object where NumPy is absent or says no with an
// Exception; anything else it raises (KeyboardInterrupt) propagates. Nothing is imported when
// NumPy is absent from sys.modules only because it is not installed.
nb::object numpy_dtype_or_null(PyObject* o) {
    nb::object numpy = nb::steal(PyImport_ImportModule("numpy"));
    if (!numpy.is_valid()) {
        clear_exception_or_throw();
        return {};
    }
    nb::object dtype_type = nb::steal(PyObject_GetAttrString(numpy.ptr(), "dtype"));
    nb::object d = dtype_type.is_valid() ? nb::steal(PyObject_CallOneArg(dtype_type.ptr(), o)) : nb::object();
    if (!d.is_valid()) clear_exception_or_throw();
    return d;
}

// A letter and digits ('f16', 'i8'): NumPy's codes, which count bytes where stridex's names count bits.
bool numpy_letter_code(PyObject* o) {
    if (!PyUnicode_Check(o)) return false;
    const char* text = PyUnicode_AsUTF8(o);
    if (!text) throw nb::python_error();
    const std::string_view t(text);
    return t.size() >= 2 && std::isalpha(static_cast<unsigned char>(t[0])) &&
           t.substr(1).find_first_not_of("0123456789") == std::string_view::npos;
}

// A stridex Dtype of a numpy.dtype: native byte order only (stridex views hold native-order
// elements, and reading '>f4' bytes as float32 would misread), and a dtype stridex has. Messages
// quote `spec`, what the caller wrote ('U3', 'f16'), before NumPy's reading of it: NumPy's name
// (str96, float128) is a word the caller never used.
Dtype from_numpy_dtype(nb::handle d, PyObject* spec, const char* what) {
    const std::string quoted = short_repr(spec);
    const std::string numpy = short_repr(d.ptr());
    const std::string reading = quoted == numpy ? quoted : quoted + " (NumPy's " + numpy + ")";
    if (!nb::cast<bool>(d.attr("isnative")))
        fail(ErrorKind::value, what, " ", reading,
             " is not in native byte order; stridex views hold "
             "native-order elements (byte-swap the data first)");
    try {
        return Dtype::from_name(nb::cast<std::string>(d.attr("name")));
    } catch (const Error& e) {
        const std::string kind = nb::cast<std::string>(d.attr("kind"));
        if (kind.find_first_of("biufc") == std::string::npos)  // str, bytes, object, datetime, record ...
            fail(ErrorKind::type, what, " ", reading,
                 " is not a dtype stridex has: stridex views hold numbers and booleans (a name such as int32, "
                 "float16, bfloat16, complex64 or bool)");
        fail(e.kind(), what, " ", reading, " is not a dtype stridex has: ", e.what(),
             numpy_letter_code(spec) ? "; NumPy's letter codes count bytes ('f2' is float16)" : "");
    }
}

// Text: a stridex name ('float32', 'float32x4'), a torch name ('torch.float32', how torch dtypes
// print: torch's names are stridex's), or any other text numpy.dtype() takes ('<f4', 'f8').
Dtype dtype_of_text(PyObject* text, const char* what) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(text, &size);
    if (!data) throw nb::python_error();
    const std::string_view name(data, static_cast<std::size_t>(size));
    const bool torch_name = name.starts_with("torch.");
    try {
        return Dtype::from_name(torch_name ? name.substr(6) : name);
    } catch (const Error& e) {
        if (torch_name) rethrow_named(e, what);
        if (nb::object d = numpy_dtype_or_null(text); d.is_valid()) return from_numpy_dtype(d, text, what);
        rethrow_named(e, what);  // the name's error: it says which names there are
    }
}

Dtype dtype_of(PyObject* o, const char* what, bool array_allowed) {
    nb::handle h(o);
    if (nb::isinstance<Dtype>(h)) return nb::cast<Dtype>(h);
    if (PyUnicode_Check(o)) return dtype_of_text(o, what);
    if (o == Py_None) fail_not_dtype(o, what);  // numpy.dtype(None) is float64: no default here
    if (std::strncmp(type_tp_name(Py_TYPE(o)), "torch.", 6) == 0) {
        // A torch.dtype prints as 'torch.float32' (torch's C type is named "torch.dtype").
        const nb::str text(h);
        if (std::string_view(text.c_str()).starts_with("torch.")) return dtype_of_text(text.ptr(), what);
    }
    if (array_allowed && !PyType_Check(o)) {
        // An array (a NumPy, torch, JAX or stridex array; a NumPy scalar) stands for its dtype,
        // read through this same parser. A dtype property that raises an Exception is no dtype;
        // anything else it raises (KeyboardInterrupt) propagates.
        nb::object d = nb::steal(PyObject_GetAttr(o, names.dtype));
        if (d.is_valid()) return dtype_of(d.ptr(), what, /*array_allowed=*/false);
        clear_exception_or_throw();
    }
    if (nb::object d = numpy_dtype_or_null(o); d.is_valid()) return from_numpy_dtype(d, o, what);
    fail_not_dtype(o, what);
}

}  // namespace

Dtype dtype_arg(PyObject* o, const char* what) { return dtype_of(o, what, /*array_allowed=*/true); }

Requirements requirements_arg(const ViewConstraintArgs& args, const char* what) {
    const std::string name(what);
    auto named = [&](const char* keyword) { return name + ": " + keyword; };
    Requirements r;
    if (args.dtype && args.dtype != Py_None) {
        r.has_dtype = true;
        r.dtype = dtype_arg(args.dtype, named("dtype").c_str());
    }
    if (args.ndim && args.ndim != Py_None) {
        r.ndim = int32_arg(args.ndim, named("ndim").c_str());
        if (r.ndim < 0 || r.ndim > kMaxNdim)
            fail(ErrorKind::value, named("ndim"), " must be in [0, ", kMaxNdim, "], found ", r.ndim);
    }
    if (args.shape && args.shape != Py_None) {
        if (PyUnicode_Check(args.shape) || PyBytes_Check(args.shape) || !PySequence_Check(args.shape))
            fail(ErrorKind::type, named("shape"), " must be a sequence of ints and None (any extent), found ",
                 type_name(args.shape));
        nb::object items = nb::steal(PySequence_Fast(args.shape, what));
        if (!items.is_valid()) throw nb::python_error();
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(items.ptr());
        if (n > Requirements::kMaxShapeRank)
            fail(ErrorKind::value, named("shape"), " has ", n, " entries; at most ", Requirements::kMaxShapeRank);
        if (r.ndim != -1 && r.ndim != n)
            fail(ErrorKind::value, what, ": ndim=", r.ndim, " contradicts shape=", short_repr(args.shape));
        r.ndim = static_cast<int>(n);
        r.has_shape = true;
        for (Py_ssize_t k = 0; k < n; ++k) {
            PyObject* e = PySequence_Fast_GET_ITEM(items.ptr(), k);
            std::int64_t extent = Requirements::kAnyExtent;
            if (e != Py_None) {
                extent = int64_arg(e, named("shape").c_str());
                if (extent < 0) fail(ErrorKind::value, named("shape"), " extents are >= 0 or None, found ", extent);
            }
            r.shape[static_cast<std::size_t>(k)] = extent;
        }
    }
    if (args.device && args.device != Py_None) {
        const Device d = device_arg(args.device, named("device").c_str(), /*ints_are_cuda_ordinals=*/false);
        r.has_device = true;
        r.device_type = d.type;
        r.device_id = d.id;
        // 'cuda' alone is any GPU, as arg::cuda: the ordinal is a requirement only where it is written.
        if (PyUnicode_Check(args.device) && PyUnicode_FindChar(args.device, ':', 0, PY_SSIZE_T_MAX, 1) == -1)
            r.device_id = -1;
    }
    if (args.writable && args.writable != Py_None) {
        if (!PyBool_Check(args.writable))
            fail(ErrorKind::type, named("writable"), " must be True, False or None, found ", type_name(args.writable));
        r.writable = args.writable == Py_True;
    }
    if (args.contiguous && args.contiguous != Py_None && args.contiguous != Py_False) {
        if (args.contiguous == Py_True) {
            r.order = Contiguity::c;
        } else if (PyUnicode_Check(args.contiguous) && PyUnicode_CompareWithASCIIString(args.contiguous, "C") == 0) {
            r.order = Contiguity::c;
        } else if (PyUnicode_Check(args.contiguous) && PyUnicode_CompareWithASCIIString(args.contiguous, "F") == 0) {
            r.order = Contiguity::f;
        } else {
            fail(ErrorKind::value, named("contiguous"), " must be 'C', 'F', True or None, found ",
                 short_repr(args.contiguous));
        }
    }
    return r;
}

PyObject* int_tuple(std::span<const std::int64_t> values, std::int64_t scale) {
    nb::object out = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(values.size())));
    if (!out.is_valid()) throw nb::python_error();
    for (std::size_t i = 0; i < values.size(); ++i) {
        PyObject* item = PyLong_FromLongLong(values[i] * scale);
        if (!item) throw nb::python_error();
        PyTuple_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), item);
    }
    return out.release().ptr();
}

}  // namespace stridex::python
