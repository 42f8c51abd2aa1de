// The dict- and buffer-based importers: __cuda_array_interface__ (v2, v3), __array_interface__ (v3)
// and the PEP 3118 buffer protocol. Rules: docs/protocols.md (importer checklist, item 10).
#include <bit>
#include <cstring>
#include <optional>
#include <string>

#include "common/arguments.hpp"
#include "common/limited_api.hpp"
#include "common/set_error.hpp"
#include "export/py_owner.hpp"
#include "import/importers.hpp"
#include "stream/stream_policy.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

constexpr const char* kCAI = "__cuda_array_interface__";
constexpr const char* kAI = "__array_interface__";
constexpr char kNativeOrder = std::endian::native == std::endian::little ? '<' : '>';

std::string repr(PyObject* value) { return short_repr(value); }

// A borrowed dict item, or nullptr when the key is absent.
PyObject* item(PyObject* dict, PyObject* key) {
    PyObject* value = PyDict_GetItemWithError(dict, key);
    if (!value && PyErr_Occurred()) throw nb::python_error();
    return value;
}

PyObject* required(PyObject* dict, PyObject* key, const char* protocol) {
    PyObject* value = item(dict, key);
    if (!value)
        fail(ErrorKind::value, protocol, " has no '", PyUnicode_AsUTF8(key), "' key (found keys ", repr(dict), ")");
    return value;
}

bool is_int(PyObject* v) noexcept { return PyLong_Check(v) && !PyBool_Check(v); }

// An int that fits in int64, else ValueError naming the key.
std::int64_t int64_of(PyObject* v, const char* protocol, PyObject* key, const char* what) {
    if (!is_int(v))
        fail(ErrorKind::value, protocol, "['", PyUnicode_AsUTF8(key), "'] must be ", what, ", found ", repr(v));
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) throw nb::python_error();
    if (overflow) fail(ErrorKind::value, protocol, "['", PyUnicode_AsUTF8(key), "'] is out of range: ", repr(v));
    return x;
}

// A data pointer: a non-negative int that fits in a pointer.
std::uintptr_t pointer_of(PyObject* v, const char* protocol) {
    if (!is_int(v)) fail(ErrorKind::value, protocol, "['data'][0] must be an int pointer, found ", repr(v));
    const unsigned long long p = PyLong_AsUnsignedLongLong(v);
    if (p == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        PyErr_Clear();
        fail(ErrorKind::value, protocol, "['data'][0] must be a pointer (an int in [0, 2**64)), found ", repr(v));
    }
    return static_cast<std::uintptr_t>(p);
}

// A tuple (or list) of exactly n ints into out; n < 0 takes any length (returned).
int ints_of_key(PyObject* v, int n, std::int64_t* out, const char* protocol, PyObject* key) {
    const bool sequence = PyTuple_Check(v) || PyList_Check(v);
    const Py_ssize_t size = sequence ? PySequence_Fast_GET_SIZE(v) : -1;
    bool ok = sequence && (n < 0 || size == n) && size <= kMaxNdim;
    for (Py_ssize_t i = 0; ok && i < size; ++i) {
        PyObject* x = PySequence_Fast_GET_ITEM(v, i);
        ok = is_int(x);
        if (!ok) break;
        int overflow = 0;
        out[i] = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (out[i] == -1 && PyErr_Occurred()) throw nb::python_error();
        ok = overflow == 0;
    }
    if (!ok) {
        if (n < 0)
            fail(ErrorKind::value, protocol, "['", PyUnicode_AsUTF8(key), "'] must be a tuple of at most ", kMaxNdim,
                 " ints, found ", repr(v));
        fail(ErrorKind::value, protocol, "['", PyUnicode_AsUTF8(key), "'] must be a tuple of ", n,
             n == 1 ? " int" : " ints", ", found ", repr(v));
    }
    return static_cast<int>(size);
}

struct Described {
    int ndim = 0;
    std::int64_t shape[kMaxNdim];
    std::int64_t strides[kMaxNdim];  // in bytes, as the interfaces give them
    bool has_strides = false;
    Dtype dtype = dtypes::uint8;
    bool subbyte_padded = false;
    nb::object element;  // the producer's typestr and descr, for opaque (void, structured) dtypes

    Layout layout() const {
        std::span<const std::int64_t> s(shape, static_cast<std::size_t>(ndim));
        if (!has_strides) return Layout::contiguous(s);
        return Layout::from_byte_strides(s, std::span<const std::int64_t>(strides, static_cast<std::size_t>(ndim)),
                                         dtype.itemsize());
    }
};

// The stridex dtype named by `obj.dtype.name` ("bfloat16", "float8_e4m3fn", "int4", ...) when its
// storage is `bytes` bytes per element; nullopt otherwise. ml_dtypes stores sub-byte types one per
// byte, i.e. padded. A `dtype` or `name` that raises an Exception is no name (the typestr decides);
// anything else it raises (KeyboardInterrupt) propagates.
std::optional<Dtype> dtype_by_name(PyObject* obj, std::int64_t bytes, bool* padded) {
    nb::object dtype = nb::steal(PyObject_GetAttr(obj, names.dtype));
    nb::object name = dtype.is_valid() ? nb::steal(PyObject_GetAttr(dtype.ptr(), names.name)) : nb::object();
    if (!name.is_valid()) {
        clear_exception_or_throw();
        return std::nullopt;
    }
    const char* text = PyUnicode_Check(name.ptr()) ? PyUnicode_AsUTF8(name.ptr()) : nullptr;
    if (!text) {
        clear_exception_or_throw();
        return std::nullopt;
    }
    try {
        const Dtype d = Dtype::from_name(text);
        // Only the types NumPy has no typestr for: 'float32' under a '>f4' is a byte-swapped array.
        const bool extended = d.code == DtypeCode::kBfloat || d.code >= DtypeCode::kFloat8_e3m4 || d.is_subbyte();
        if (!extended) return std::nullopt;
        if (d.is_subbyte() && bytes == 1) {
            *padded = true;
            return d;
        }
        if (!d.is_subbyte() && d.itemsize() == bytes) return d;
    } catch (const Error&) {
        // not a stridex dtype name (a structured dtype, 'void32', 'datetime64[s]'...)
    }
    return std::nullopt;
}

// The dtype of an interface typestr. NumPy has no typestr for bfloat16 and float8/6/4: arrays of
// ml_dtypes types say '<V2' (bfloat16), '<f1' (float8_e5m2) or '|V1', so when the typestr is
// opaque or not one stridex takes, the dtype's name is read from the object (`obj.dtype.name`).
Dtype dtype_of(PyObject* obj, PyObject* typestr, const char* protocol, bool* padded) {
    if (!PyUnicode_Check(typestr)) fail(ErrorKind::value, protocol, "['typestr'] must be a str, found ", repr(typestr));
    Py_ssize_t length = 0;
    const char* text = PyUnicode_AsUTF8AndSize(typestr, &length);
    if (!text) throw nb::python_error();
    const std::string_view ts(text, static_cast<std::size_t>(length));
    const char kind = ts.size() >= 2 ? ts[1] : '\0';
    if (kind == 'O' || kind == 'M' || kind == 'm')  // NumPy's '|O', '<M8[s]', '<m8[ns]'
        fail(ErrorKind::unsupported, protocol, "['typestr'] is '", excerpt(ts),
             "': objects, datetimes and timedeltas have no DLPack dtype");
    // One byte or native order: ml_dtypes types are native ('<' here), never byte-swapped.
    const bool native = ts.size() >= 3 && (ts[0] == '|' || ts[0] == '=' || ts[0] == kNativeOrder);
    if (kind == 'V' && native)
        if (auto d = dtype_by_name(obj, std::strtoll(text + 2, nullptr, 10), padded)) return *d;
    try {
        return Dtype::from_typestr(ts);
    } catch (const Error& e) {
        if (e.kind() == ErrorKind::unsupported && native)
            if (auto d = dtype_by_name(obj, std::strtoll(text + 2, nullptr, 10), padded)) return *d;
        fail(e.kind(), protocol, "['typestr']: ", e.what());
    }
}

// The layout a dict describes; a refusal names the protocol (the rules are Layout's).
Layout layout_of(const Described& d, const char* protocol) {
    try {
        return d.layout();
    } catch (const Error& e) {
        fail(e.kind(), protocol, "['shape'] and ['strides']: ", e.what());
    }
}

// shape, typestr, strides, mask: shared by both interface dicts.
void describe(PyObject* obj, PyObject* dict, const char* protocol, Described& d) {
    d.ndim = ints_of_key(required(dict, names.shape, protocol), -1, d.shape, protocol, names.shape);
    for (int i = 0; i < d.ndim; ++i)
        if (d.shape[i] < 0)
            fail(ErrorKind::value, protocol, "['shape'] must be non-negative, found ", repr(item(dict, names.shape)));
    d.dtype = dtype_of(obj, required(dict, names.typestr, protocol), protocol, &d.subbyte_padded);
    if (d.dtype.is_opaque_bytes()) {
        // A void or structured element: kept opaque, with the producer's typestr and descr, which
        // the View's own interfaces give back.
        PyObject* descr = item(dict, names.descr);
        nb::dict described;
        described["typestr"] = nb::borrow(required(dict, names.typestr, protocol));
        described["descr"] = descr ? nb::borrow(descr) : nb::none();
        // The producer's PEP 3118 format of a struct too, where it has a buffer (NumPy records:
        // 'T{i:a:=d:b:}'), so that the View's buffer gives what the producer's does. Not pad bytes
        // ('12x', a plain void): NumPy reads those back as an empty struct, so the View's buffer
        // refuses and NumPy takes the typestr ('|V12') from __array_interface__ instead.
        if (PyObject_CheckBuffer(obj)) {
            Py_buffer b;
            if (PyObject_GetBuffer(obj, &b, PyBUF_RECORDS_RO) == 0) {
                if (b.format && b.itemsize == d.dtype.itemsize() && !std::string_view(b.format).ends_with('x'))
                    described["format"] = b.format;
                PyBuffer_Release(&b);
            } else {
                clear_exception_or_throw();  // no format then, unless the refusal was no refusal
            }
        }
        d.element = std::move(described);
    }
    if (PyObject* mask = item(dict, names.mask); mask && mask != Py_None)
        fail(ErrorKind::unsupported, protocol, "['mask'] is not None: masked arrays are not supported");
    PyObject* strides = item(dict, names.strides);
    // Absent or None: C-contiguous (CAI v2+, array interface v3). Warp once crashed on this.
    if (!strides || strides == Py_None) return;
    ints_of_key(strides, d.ndim, d.strides, protocol, names.strides);
    d.has_strides = true;
}

// (ptr, readonly)
std::uintptr_t data_tuple(PyObject* data, const char* protocol, bool* readonly) {
    if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2)
        fail(ErrorKind::value, protocol, "['data'] must be a (pointer, readonly) tuple, found ", repr(data));
    const std::uintptr_t ptr = pointer_of(PyTuple_GET_ITEM(data, 0), protocol);
    const int ro = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    if (ro < 0) throw nb::python_error();
    *readonly = ro != 0;
    return ptr;
}

void require_pointer(std::uintptr_t ptr, const Layout& layout, const char* protocol) {
    if (ptr == 0 && !layout.empty())
        fail(ErrorKind::value, protocol, "['data'] pointer is 0 for a non-empty array of shape ", layout);
}

// Gets a buffer of `obj` with `flags` into a heap Py_buffer whose Owner releases it (with the GIL).
// An exporter's refusal is a BufferError whatever it raised (NumPy: ValueError "cannot include
// dtype 'E' in a buffer"), so that the next protocol is tried and the messages are collected.
Owner get_buffer(PyObject* obj, int flags, Py_buffer** out) {
    auto* buffer = new Py_buffer();
    if (PyObject_GetBuffer(obj, buffer, flags) != 0) {
        delete buffer;
        if (PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_TypeError)) {
            nb::python_error refusal;
            fail(ErrorKind::buffer, "buffer protocol refused: ", nb::str(refusal.value()).c_str());
        }
        throw nb::python_error();
    }
    return adopt_buffer(buffer, out);
}

// A writable buffer if the object gives one, else a read-only one.
Owner get_bytes(PyObject* obj, Py_buffer** out) {
    auto* buffer = new Py_buffer();
    if (PyObject_GetBuffer(obj, buffer, PyBUF_WRITABLE) != 0) {
        if (!PyErr_ExceptionMatches(PyExc_BufferError)) {
            delete buffer;
            throw nb::python_error();
        }
        PyErr_Clear();
        delete buffer;
        return get_buffer(obj, PyBUF_SIMPLE, out);
    }
    return adopt_buffer(buffer, out);
}

}  // namespace

View import_cai(PyObject* obj, PyObject* dict, std::intptr_t& ready, nb::object* element) {
    if (!PyDict_Check(dict)) fail(ErrorKind::value, kCAI, " must be a dict, found ", type_name(dict));
    const std::int64_t version = int64_of(required(dict, names.version, kCAI), kCAI, names.version, "an int");
    // Versions 0 and 1 still circulate (RAPIDS' rmm.DeviceBuffer says 0, and Dask's UCX transport
    // receives device frames into those) and CuPy, Numba and torch read them; they differ from v2
    // only in what v2 made explicit (strides None is C order, ptr 0 for an empty array), which is
    // how stridex reads every version.
    if (version < 0 || version > 3)
        fail(ErrorKind::unsupported, kCAI, " version ", version, " is not supported (stridex reads versions 0 to 3)");
    Described d;
    describe(obj, dict, kCAI, d);
    bool readonly = false;
    const std::uintptr_t ptr = data_tuple(required(dict, names.data, kCAI), kCAI, &readonly);
    Layout layout = layout_of(d, kCAI);
    require_pointer(ptr, layout, kCAI);

    // v3: the stream the producer's pending work is on; None or absent: nothing pending.
    ready = kNoStream;
    if (PyObject* stream = item(dict, names.stream); stream && stream != Py_None) {
        const std::int64_t s = int64_of(stream, kCAI, names.stream, "None or a stream handle (an int)");
        ready = checked_stream_int(s, "__cuda_array_interface__['stream']", /*allow_no_sync=*/false);
    }
    // No device key: the pointer's own attributes say where it lives (0: the current device).
    const Device device = device_of_cuda_pointer(ptr);
    if (d.element.is_valid()) *element = std::move(d.element);
    return View(reinterpret_cast<void*>(ptr), 0, std::move(layout), d.dtype, device, readonly, owner_of(obj),
                d.subbyte_padded);
}

View import_array_interface(PyObject* obj, PyObject* dict, nb::object* element) {
    if (!PyDict_Check(dict)) fail(ErrorKind::value, kAI, " must be a dict, found ", type_name(dict));
    const std::int64_t version = int64_of(required(dict, names.version, kAI), kAI, names.version, "an int");
    if (version != 3)
        fail(ErrorKind::unsupported, kAI, " version ", version, " is not supported (stridex reads version 3)");
    Described d;
    describe(obj, dict, kAI, d);
    Layout layout = layout_of(d, kAI);
    PyObject* data = item(dict, names.data);
    if (data && PyTuple_Check(data)) {
        // (ptr, readonly): 'offset' does not apply (NumPy ignores it too).
        bool readonly = false;
        const std::uintptr_t ptr = data_tuple(data, kAI, &readonly);
        require_pointer(ptr, layout, kAI);
        if (d.element.is_valid()) *element = std::move(d.element);
        return View(reinterpret_cast<void*>(ptr), 0, std::move(layout), d.dtype, Device::cpu(), readonly, owner_of(obj),
                    d.subbyte_padded);
    }
    // A buffer object, or None/absent for the object's own buffer, plus 'offset' bytes. Anything
    // else is a malformed dict, named like every other (not the buffer protocol's TypeError).
    PyObject* source = data && data != Py_None ? data : obj;
    if (!PyObject_CheckBuffer(source)) {
        if (source == data)
            fail(ErrorKind::value, kAI,
                 "['data'] must be a (pointer, readonly) tuple, an object with the buffer "
                 "protocol, or None (the object's own buffer), found ",
                 repr(data));
        if (data)
            fail(ErrorKind::value, kAI, "['data'] is None (the object's own buffer), but ", type_name(obj),
                 " has no buffer protocol");
        fail(ErrorKind::value, kAI, " has no 'data' key (the object's own buffer), but ", type_name(obj),
             " has no buffer protocol (found keys ", repr(dict), ")");
    }
    std::int64_t offset = 0;
    if (PyObject* o = item(dict, names.offset); o && o != Py_None) {
        offset = int64_of(o, kAI, names.offset, "an int");
        if (offset < 0) fail(ErrorKind::value, kAI, "['offset'] must be >= 0, found ", offset);
    }
    Py_buffer* buffer = nullptr;
    Owner owner = get_bytes(source, &buffer);
    const Span span = layout.byte_span(d.dtype.itemsize());
    if (!span_within(span, offset, buffer->len))
        fail(ErrorKind::value, kAI, "['offset'] ", offset, " with bytes [", span.lo, ", ", span.hi,
             ") of the layout leaves the buffer of ", buffer->len, " bytes");
    if (d.element.is_valid()) *element = std::move(d.element);
    return View(buffer->buf, offset, std::move(layout), d.dtype, Device::cpu(), buffer->readonly != 0, std::move(owner),
                d.subbyte_padded);
}

// A PEP 3118 format of a void or structured element: a struct ('T{...}') or pad bytes ('12x'),
// after an optional byte-order prefix. Such elements import as opaque bytes of the buffer's itemsize.
bool is_opaque_format(std::string_view format) noexcept {
    if (!format.empty() && std::string_view("@=<>!").find(format[0]) != std::string_view::npos) format.remove_prefix(1);
    if (format.starts_with("T{")) return format.ends_with('}');
    while (!format.empty() && format[0] >= '0' && format[0] <= '9') format.remove_prefix(1);
    return format == "x";
}

View import_buffer(PyObject* obj, nb::object* element) {
    Py_buffer* b = nullptr;
    // RECORDS_RO: strides and format, read-only accepted (the flag says which it is).
    Owner owner = get_buffer(obj, PyBUF_RECORDS_RO, &b);
    if (b->suboffsets)
        for (int i = 0; i < b->ndim; ++i)
            if (b->suboffsets[i] >= 0)
                fail(ErrorKind::unsupported, "buffer protocol: PIL-style suboffsets are not supported (",
                     type_name(obj), ")");
    Dtype dtype = dtypes::uint8;
    const bool opaque = b->format && is_opaque_format(b->format);
    if (opaque) {
        dtype = Dtype::opaque_bytes(b->itemsize);
    } else if (b->format) {
        dtype = Dtype::from_buffer_format(b->format);
    }
    if (b->itemsize != dtype.itemsize())  // also keeps b->itemsize > 0 for the divisions below
        fail(ErrorKind::buffer, "buffer protocol: format '", b->format ? b->format : "B", "' has ", dtype.itemsize(),
             "-byte items but the buffer says ", b->itemsize);
    if (b->ndim < 0 || b->ndim > kMaxNdim) fail(ErrorKind::value, "buffer protocol: ndim ", b->ndim, " out of range");
    const auto ndim = static_cast<std::size_t>(b->ndim);
    if (ndim > 1 && !b->shape) fail(ErrorKind::value, "buffer protocol: ndim ", b->ndim, " without a shape");
    std::int64_t shape[kMaxNdim];
    std::int64_t strides[kMaxNdim];
    for (std::size_t i = 0; i < ndim; ++i) {
        shape[i] = b->shape ? b->shape[i] : b->len / b->itemsize;
        if (b->strides) strides[i] = b->strides[i];
    }
    std::span<const std::int64_t> s(shape, ndim);
    Layout layout = b->strides ? Layout::from_byte_strides(s, std::span<const std::int64_t>(strides, ndim), b->itemsize)
                               : Layout::contiguous(s);
    if (opaque) {
        nb::dict described;  // the producer's own format, which the View's buffer gives back
        described["format"] = b->format;
        *element = std::move(described);
    }
    return View(b->buf, 0, std::move(layout), dtype, Device::cpu(), b->readonly != 0, std::move(owner));
}

}  // namespace stridex::python
