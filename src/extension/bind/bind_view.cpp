// The stridex.View type: attributes, basic indexing (ints, slices, Ellipsis, None), .T, permute,
// reshape and repr. Protocol methods (__dlpack__, interfaces, buffer) are added by export.cpp.
#include <nanobind/stl/string.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "export/export.hpp"
#include "export/py_owner.hpp"
#include "sanitizer/sanitizer.hpp"
#include "stream/stream_policy.hpp"
#include "stridex/cuda/copy.hpp"

namespace nb = nanobind;

namespace stridex::python {

namespace {

nb::tuple ints(std::span<const std::int64_t> values, std::int64_t scale = 1) {
    return nb::steal<nb::tuple>(int_tuple(values, scale));
}

// f(*ints) and f(sequence) both work, as in NumPy (v.reshape(2, 3) and v.reshape((2, 3))).
nb::handle single_sequence_or_args(const nb::args& args) {
    if (args.size() == 1 && !PyIndex_Check(args[0].ptr())) return args[0];
    return args;
}

Slice to_slice(nb::handle s) {
    Py_ssize_t start = 0, stop = 0, step = 0;
    if (PySlice_Unpack(s.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
    Slice out;
    out.step = step;
    // PySlice_Unpack turns None into sentinel extremes; keep None as "absent" for exact semantics.
#ifdef Py_LIMITED_API
    const nb::object first = s.attr("start"), last = s.attr("stop");
    if (!first.is_none()) out.start = start;
    if (!last.is_none()) out.stop = stop;
#else
    auto* slice = reinterpret_cast<PySliceObject*>(s.ptr());
    if (slice->start != Py_None) out.start = start;
    if (slice->stop != Py_None) out.stop = stop;
#endif
    return out;
}

View index_view(const View& base, nb::handle key) {
    nb::tuple items = nb::isinstance<nb::tuple>(key) ? nb::borrow<nb::tuple>(key) : nb::make_tuple(key);
    int consuming = 0;  // entries that take an axis of the base view
    int ellipses = 0;
    for (nb::handle item : items) {
        if (item.is(Py_Ellipsis))
            ++ellipses;
        else if (!item.is_none())
            ++consuming;
    }
    if (ellipses > 1) fail(ErrorKind::index, "an index can only have a single ellipsis ('...')");
    if (consuming > base.ndim())
        fail(ErrorKind::index, "too many indices: the view is ", base.ndim(), "-dimensional but ", consuming,
             " were indexed");
    View v = base;
    int axis = 0;
    for (nb::handle item : items) {
        if (item.is(Py_Ellipsis)) {
            axis += base.ndim() - consuming;
        } else if (item.is_none()) {
            v = v.expand(axis++);
        } else if (PySlice_Check(item.ptr())) {
            v = v.slice(axis++, to_slice(item));
        } else if (PyIndex_Check(item.ptr()) && !PyBool_Check(item.ptr())) {
            v = v.index(axis, index_arg(item.ptr(), "index"));
        } else {
            fail(ErrorKind::index, "stridex views take ints, slices, Ellipsis and None as indices (no copy); found ",
                 type_name(item.ptr()));
        }
    }
    return v;
}

std::string repr(const PyView& self) {
    const View& v = self.view;
    std::ostringstream out;
    out << "stridex.View(shape=(";
    for (int a = 0; a < v.ndim(); ++a) out << (a ? ", " : "") << v.shape()[static_cast<std::size_t>(a)];
    out << (v.ndim() == 1 ? ",)" : ")") << ", strides=(";
    for (int a = 0; a < v.ndim(); ++a) out << (a ? ", " : "") << v.strides()[static_cast<std::size_t>(a)];
    out << (v.ndim() == 1 ? ",)" : ")") << ", dtype=" << v.dtype().name() << ", device=" << v.device().name()
        << ", ptr=" << hex(reinterpret_cast<std::uintptr_t>(v.ptr()));
    if (v.readonly()) out << ", readonly";
    if (v.stream() != kNoStream) out << ", stream=" << v.stream();
    out << ")";
    return out.str();
}

const char* writability_name(Writability w) {
    switch (w) {
        case Writability::writable: return "writable";
        case Writability::readonly: return "readonly";
        case Writability::unknown: return "unknown";
        case Writability::immutable: return "immutable";
    }
    return "?";
}

nb::object derived(const PyView& self, View v) { return wrap_view(std::move(v), self.source, self.element); }

// ---- Python scalars: item(), tolist(), float(), int(), complex(), bool(), operator.index() ------
// As NumPy's arrays do. GPU memory is copied to the host first (after the work pending on the view,
// as CuPy's and torch's item() do): a user asking for a Python number wants the number, and the
// copy is the one stridex would make for v.to('cpu') anyway.

double half_to_double(std::uint16_t h) {
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    double v = 0;
    if (exponent == 0)
        v = std::ldexp(mantissa, -24);  // subnormal
    else if (exponent == 31)
        v = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else
        v = std::ldexp(mantissa | 0x400, exponent - 25);
    return (h & 0x8000) ? -v : v;
}

// The 8-bit floats, as ml_dtypes defines them: `ieee` has infinities and NaNs at the top exponent,
// `fn` only one NaN pattern per sign (all ones), `fnuz` no negative zero and 0x80 as its NaN.
struct Minifloat {
    int exponent_bits, mantissa_bits, bias;
    enum Kind : unsigned char { ieee, fn, fnuz } kind;
};

double minifloat_to_double(std::uint8_t b, Minifloat f) {
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    if (f.kind == Minifloat::fnuz && b == 0x80) return nan;
    const int max_exponent = (1 << f.exponent_bits) - 1, max_mantissa = (1 << f.mantissa_bits) - 1;
    const int exponent = (b >> f.mantissa_bits) & max_exponent;
    const int mantissa = b & max_mantissa;
    if (f.kind == Minifloat::ieee && exponent == max_exponent)
        return mantissa ? nan : ((b & 0x80) ? -1.0 : 1.0) * std::numeric_limits<double>::infinity();
    if (f.kind == Minifloat::fn && exponent == max_exponent && mantissa == max_mantissa) return nan;
    const double v = exponent == 0 ? std::ldexp(mantissa, 1 - f.bias - f.mantissa_bits)
                                   : std::ldexp(mantissa | (1 << f.mantissa_bits), exponent - f.bias - f.mantissa_bits);
    return (b & 0x80) ? -v : v;
}

[[noreturn]] void fail_no_scalar(const char* what, Dtype d) {
    fail(ErrorKind::type, what, ": ", d.name(),
         " elements have no Python scalar (numbers and booleans of 8 bits or more, one lane); "
         "np.asarray(view) reads them, with ml_dtypes for the small floats");
}

template <class T>
T load(const unsigned char* at) {
    T v;
    std::memcpy(&v, at, sizeof v);
    return v;
}

// The element at `at` (host memory) as a Python scalar.
nb::object scalar_at(const unsigned char* at, Dtype d, const char* what) {
    if (d.lanes != 1 || d.bits < 8) fail_no_scalar(what, d);
    switch (d.code) {
        case DtypeCode::kBool: return nb::bool_(*at != 0);
        case DtypeCode::kInt:
            switch (d.bits) {
                case 8: return nb::int_(load<std::int8_t>(at));
                case 16: return nb::int_(load<std::int16_t>(at));
                case 32: return nb::int_(load<std::int32_t>(at));
                case 64: return nb::int_(load<std::int64_t>(at));
                default: break;
            }
            break;
        case DtypeCode::kUInt:
            switch (d.bits) {
                case 8: return nb::int_(load<std::uint8_t>(at));
                case 16: return nb::int_(load<std::uint16_t>(at));
                case 32: return nb::int_(load<std::uint32_t>(at));
                case 64: return nb::int_(load<std::uint64_t>(at));
                default: break;
            }
            break;
        case DtypeCode::kFloat:
            switch (d.bits) {
                case 16: return nb::float_(half_to_double(load<std::uint16_t>(at)));
                case 32: return nb::float_(load<float>(at));
                case 64: return nb::float_(load<double>(at));
                default: break;
            }
            break;
        case DtypeCode::kBfloat: return nb::float_(std::bit_cast<float>(std::uint32_t{load<std::uint16_t>(at)} << 16));
        case DtypeCode::kComplex: {
            double re = 0, im = 0;
            if (d.bits == 64) {
                re = load<float>(at), im = load<float>(at + 4);
            } else if (d.bits == 128) {
                re = load<double>(at), im = load<double>(at + 8);
            } else if (d.bits == 32) {
                re = half_to_double(load<std::uint16_t>(at)), im = half_to_double(load<std::uint16_t>(at + 2));
            } else {
                break;
            }
            return nb::steal(PyComplex_FromDoubles(re, im));
        }
        case DtypeCode::kFloat8_e3m4: return nb::float_(minifloat_to_double(*at, {3, 4, 3, Minifloat::ieee}));
        case DtypeCode::kFloat8_e4m3: return nb::float_(minifloat_to_double(*at, {4, 3, 7, Minifloat::ieee}));
        case DtypeCode::kFloat8_e4m3b11fnuz: return nb::float_(minifloat_to_double(*at, {4, 3, 11, Minifloat::fnuz}));
        case DtypeCode::kFloat8_e4m3fn: return nb::float_(minifloat_to_double(*at, {4, 3, 7, Minifloat::fn}));
        case DtypeCode::kFloat8_e4m3fnuz: return nb::float_(minifloat_to_double(*at, {4, 3, 8, Minifloat::fnuz}));
        case DtypeCode::kFloat8_e5m2: return nb::float_(minifloat_to_double(*at, {5, 2, 15, Minifloat::ieee}));
        case DtypeCode::kFloat8_e5m2fnuz: return nb::float_(minifloat_to_double(*at, {5, 2, 16, Minifloat::fnuz}));
        case DtypeCode::kFloat8_e8m0fnu:  // exponent only, unsigned: 2**(b - 127), 0xff is NaN
            return nb::float_(*at == 0xff ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, *at - 127));
        default: break;
    }
    fail_no_scalar(what, d);
}

// The view, readable by the host now: itself when it is host memory with nothing pending, else a
// copy on the CPU made by the copy engine after the view's pending work (stream kNoStream: the copy
// completes before returning).
View host_readable(const PyView& self, const char* what) {
    const View& v = self.view;
    if (v.device().host_accessible() && v.stream() == kNoStream && !v.pending()) return v;
    if (v.is_packed_subbyte()) fail_no_scalar(what, v.dtype());
    // A host reader: no consumer's stream (the copy completes before it returns).
    if (sanitizer::on()) sanitizer::observe({v, self.source.ptr(), v.stream(), kNoStream, what, {}});
    const nb::gil_scoped_release release;
    return copy_to(v, Device::cpu(), Order::C, kNoStream);
}

// The elements below `at` along axes [axis, ndim) as nested lists.
nb::object nested_list(const View& v, const unsigned char* at, int axis, const char* what) {
    if (axis == v.ndim()) return scalar_at(at, v.dtype(), what);
    const std::int64_t n = v.shape()[static_cast<std::size_t>(axis)];
    const std::int64_t step = v.byte_stride(axis);
    nb::list out;
    for (std::int64_t i = 0; i < n; ++i) out.append(nested_list(v, at + i * step, axis + 1, what));
    return out;
}

nb::object item_of(const PyView& self, const char* what) {
    if (self.view.size() != 1)
        fail(ErrorKind::value, what, ": only a view of one element converts to a Python scalar, found ",
             plain_layout(self.view.layout()));
    const View host = host_readable(self, what);
    if (host.dtype().is_subbyte() || host.dtype().lanes != 1) fail_no_scalar(what, host.dtype());
    return scalar_at(reinterpret_cast<const unsigned char*>(host.ptr()), host.dtype(), what);
}

// float(), int(), complex(), operator.index(): 0-d views only, as NumPy 2 (which deprecates the
// conversion of one-element arrays of higher rank): a shape (1,) view is a sequence, not a number.
nb::object scalar_of_0d(const PyView& self, const char* what) {
    if (self.view.ndim() != 0)
        fail(ErrorKind::type, what, ": only a 0-d view converts to a Python scalar, found ",
             plain_layout(self.view.layout()), " (v.item() takes any view of one element)");
    return item_of(self, what);
}

// ---- Cyclic garbage collection ------------------------------------------------------------------
// A View references its source (`.owner`) and, through its Owner, the object whose memory it is
// (owner_of, or the exporter of a Py_buffer): `h.v = stridex.view(h)` is a cycle. Both are
// reported, the Owner's object only while this View holds that Owner alone: a reference shared
// with other Views or C++ copies is not this object's to report (reporting it from each holder
// would count one reference many times and let the collector free a live object). Owners that
// hold Python objects out of sight (a producer's DLPack deleter) cannot be reported.
int view_traverse(PyObject* self, visitproc visit, void* arg) {
    Py_VISIT(Py_TYPE(self));              // heap types are referenced by their instances
    if (!nb::inst_ready(self)) return 0;  // being built by stridex.view(), or made by __new__
    const PyView& v = *nb::inst_ptr<PyView>(self);
    Py_VISIT(v.source.ptr());
    Py_VISIT(v.element.ptr());
    if (v.view.owner().use_count() == 1) Py_VISIT(python_object_of(v.view.owner()));
    return 0;
}

// Breaks a cycle: the View becomes an empty read-only view of nothing, so that whatever still
// reaches this object (a finalizer of the same cycle) finds a valid, harmless View.
int view_clear(PyObject* self) {
    if (!nb::inst_ready(self)) return 0;
    PyView& v = *nb::inst_ptr<PyView>(self);
    static constexpr std::int64_t kEmpty[] = {0};
    View old = std::exchange(v.view,
                             View(nullptr, 0, Layout::contiguous(kEmpty), dtypes::uint8, Device::cpu(), true, Owner()));
    nb::object source = std::exchange(v.source, nb::none());
    nb::object element = std::exchange(v.element, nb::object());
    return 0;  // `old`, `source` and `element` drop here, once the object is consistent again
}

const PyType_Slot kViewSlots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(&view_getbuffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(&view_releasebuffer)},
    {Py_tp_traverse, reinterpret_cast<void*>(&view_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&view_clear)},
    {0, nullptr},
};

}  // namespace

PyTypeObject* g_view_type = nullptr;

void fail_uninitialized(PyObject* o) {
    fail(ErrorKind::type, "this ", type_name(o), " holds no view: it was made by __new__, not by stridex.view()");
}

void bind_view(nb::module_& m) {
    auto cls = nb::class_<PyView>(m, "View", "A zero-copy strided view of CPU or GPU memory owned by another object.",
                                  nb::type_slots(kViewSlots), nb::pooled());
    g_view_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
    cls.def(
           "__init__",
           [](nb::handle, nb::args, nb::kwargs) {
               fail(ErrorKind::type, "stridex.View cannot be created directly: call stridex.view(obj) on an array, "
                                     "or stridex.from_pointer(...) for raw memory");
           },
           nb::sig("def __init__(self, *args: object, **kwargs: object) -> None"))
        .def_prop_ro(
            "ptr", [](const PyView& s) { return reinterpret_cast<std::uintptr_t>(s.view.ptr()); },
            "Address of element 0 (data pointer plus byte offset).")
        .def_prop_ro(
            "shape", [](const PyView& s) { return ints(s.view.shape()); },
            nb::sig("def shape(self) -> tuple[int, ...]"), "The extent of each axis.")
        .def_prop_ro(
            "strides", [](const PyView& s) { return ints(s.view.strides()); },
            nb::sig("def strides(self) -> tuple[int, ...]"), "Strides in elements.")
        .def_prop_ro(
            "byte_strides", [](const PyView& s) { return ints(s.view.strides(), s.view.itemsize()); },
            nb::sig("def byte_strides(self) -> tuple[int, ...]"), "Strides in bytes, as NumPy's strides.")
        .def_prop_ro(
            "dtype", [](const PyView& s) { return s.view.dtype(); },
            "The element type (a stridex.Dtype; compares equal to 'float32', np.float32 ...).")
        .def_prop_ro(
            "device", [](const PyView& s) { return s.view.device(); },
            "Where the memory is (a stridex.Device; compares equal to 'cpu', 'cuda:0' ...).")
        .def_prop_ro(
            "readonly", [](const PyView& s) { return s.view.readonly(); },
            "True when the memory must not be written through this view (every export keeps the flag); "
            "stridex.view(x, writable=False) makes a read-only view.")
        .def_prop_ro(
            "writability", [](const PyView& s) { return writability_name(s.view.writability()); },
            "Where the read-only flag comes from: 'writable' or 'readonly' (the producer said so), "
            "'unknown' (it could not say: a legacy DLPack capsule; writable here) or 'immutable' "
            "(read-only by the producer's contract, unflagged in its own exports: JAX).")
        .def_prop_ro(
            "size", [](const PyView& s) { return s.view.size(); }, "The number of elements.")
        .def_prop_ro(
            "ndim", [](const PyView& s) { return s.view.ndim(); }, "The number of axes.")
        .def_prop_ro(
            "itemsize", [](const PyView& s) { return s.view.itemsize(); }, "Bytes of one element (rounded up).")
        .def_prop_ro(
            "nbytes", [](const PyView& s) { return s.view.nbytes(); },
            "Bytes of the elements (size * itemsize; packed storage for sub-byte dtypes).")
        .def_prop_ro(
            "byte_span",
            [](const PyView& s) {
                const Span span = s.view.byte_span();
                return nb::make_tuple(span.lo, span.hi);
            },
            nb::sig("def byte_span(self) -> tuple[int, int]"),
            "(lo, hi): the bytes the elements occupy, relative to ptr (negative strides reach below it).")
        .def_prop_ro(
            "is_c_contiguous", [](const PyView& s) { return s.view.layout().is_c_contiguous(); },
            "Row-major and packed, as NumPy's C_CONTIGUOUS flag (axes of extent 1 take any stride).")
        .def_prop_ro(
            "is_f_contiguous", [](const PyView& s) { return s.view.layout().is_f_contiguous(); },
            "Column-major and packed, as NumPy's F_CONTIGUOUS flag.")
        .def_prop_ro(
            "is_dense", [](const PyView& s) { return s.view.layout().is_dense(); },
            "The elements fill their byte span without gaps, in some order of axes.")
        .def_prop_ro(
            "owner", [](const PyView& s) { return s.source; }, nb::sig("def owner(self) -> typing.Any"),
            "The object whose memory this is (kept alive).")
        .def_prop_ro(
            "stream",
            [](const PyView& s) -> nb::object {
                return s.view.stream() == kNoStream ? nb::object(nb::none()) : nb::object(nb::int_(s.view.stream()));
            },
            nb::sig("def stream(self) -> int | None"),
            "The CUDA stream the data is ready on (DLPack encoding), or None when nothing is pending.")
        .def_prop_ro(
            "pending_event", [](const PyView& s) { return s.view.pending() != nullptr; },
            nb::sig("def pending_event(self) -> bool"),
            "True when the data is ready only after another process's event (a View unpickled from another "
            "process): each consumer's stream waits for it when it takes the View (docs/distributed.md).")
        .def(
            "_pending_event_waited",
            [](const PyView& s, nb::handle stream) -> nb::object {
                const auto& pending = s.view.pending();
                if (!pending) return nb::none();
                if (stream.is_none()) return nb::bool_(pending->waited());
                const std::intptr_t consumer = stream_int_arg(stream.ptr(), "View._pending_event_waited(): stream",
                                                              /*allow_no_sync=*/false);
                return nb::bool_(pending->waited_by(consumer, s.view.device()));
            },
            nb::arg("stream").none() = nb::none(),
            nb::sig("def _pending_event_waited(self, stream: int | None = None) -> bool | None"),
            "None without a pending event; else whether `stream` (None: any stream of this process) or the "
            "host waited for it. For the stream sanitizer.")
        .def(
            "__len__",
            [](const PyView& s) {
                if (s.view.ndim() == 0) fail(ErrorKind::type, "len() of a 0-d view");
                return s.view.shape()[0];
            },
            "The extent of the first axis; TypeError for a 0-d view.")
        .def(
            "__getitem__", [](const PyView& s, nb::handle key) { return derived(s, index_view(s.view, key)); },
            nb::arg("key").none(),
            nb::sig("def __getitem__(self, key: typing.SupportsIndex | slice | types.EllipsisType | None | "
                    "tuple[typing.SupportsIndex | slice | types.EllipsisType | None, ...], /) -> View"),
            "Basic indexing without a copy: ints, slices (any step, negative too), Ellipsis and None (a new axis of "
            "extent 1), as NumPy's basic indexing; the result shares this view's memory and owner.")
        .def(
            "__iter__",
            [](nb::handle self) {
                if (py_view(self.ptr()).view.ndim() == 0) fail(ErrorKind::type, "iteration over a 0-d view");
                // The sequence iterator: v[0], v[1], ... until IndexError, made one at a time.
                return nb::steal(PySeqIter_New(self.ptr()));
            },
            nb::sig("def __iter__(self) -> collections.abc.Iterator[View]"),
            "The views v[0], v[1], ... along the first axis (no copy); TypeError for a 0-d view.")
        .def(
            "item", [](const PyView& s) { return item_of(s, "item()"); },
            nb::sig("def item(self) -> bool | int | float | complex"),
            "The one element of a view of size 1 as a Python bool, int, float or complex, as NumPy's item(). "
            "Device memory is copied to the host first, after the work pending on the view (as CuPy's and torch's "
            "item()); ValueError for any other size.")
        .def(
            "tolist",
            [](const PyView& s) {
                const View host = host_readable(s, "tolist()");
                return nested_list(host, reinterpret_cast<const unsigned char*>(host.ptr()), 0, "tolist()");
            },
            nb::sig("def tolist(self) -> typing.Any"),
            "The elements as nested lists of Python scalars (a scalar for a 0-d view), as NumPy's tolist(). Device "
            "memory is copied to the host first, after the work pending on the view.")
        .def(
            "__float__", [](const PyView& s) { return nb::float_(scalar_of_0d(s, "float()")); },
            nb::sig("def __float__(self) -> float"), "float(v) of a 0-d view (device memory is copied to the host).")
        .def(
            "__int__", [](const PyView& s) { return nb::int_(scalar_of_0d(s, "int()")); },
            nb::sig("def __int__(self) -> int"),
            "int(v) of a 0-d view: floats truncate, as int(3.7) (device memory is copied to the host).")
        .def(
            "__complex__",
            [](const PyView& s) {
                const nb::object x = scalar_of_0d(s, "complex()");
                const double re = PyComplex_RealAsDouble(x.ptr());
                if (re == -1.0 && PyErr_Occurred()) throw nb::python_error();
                const double im = PyComplex_ImagAsDouble(x.ptr());
                if (im == -1.0 && PyErr_Occurred()) throw nb::python_error();
                return nb::steal(PyComplex_FromDoubles(re, im));
            },
            nb::sig("def __complex__(self) -> complex"),
            "complex(v) of a 0-d view (device memory is copied to the host).")
        .def(
            "__index__",
            [](const PyView& s) {
                const Dtype d = s.view.dtype();
                // As NumPy: only integers index (a float or bool that happens to hold 1 does not).
                if (d.code != DtypeCode::kInt && d.code != DtypeCode::kUInt)
                    fail(ErrorKind::type, "operator.index(): only an integer 0-d view is an index, found ", d.name());
                return nb::int_(scalar_of_0d(s, "operator.index()"));
            },
            nb::sig("def __index__(self) -> int"),
            "A 0-d integer view as an index (range(v), seq[v]), as NumPy's 0-d integer arrays.")
        .def(
            "__bool__",
            [](const PyView& s) {
                // As NumPy: one element is its truth; none or several are ambiguous, not "non-empty".
                if (s.view.size() == 0)
                    fail(ErrorKind::value, "the truth value of an empty view is ambiguous (test v.size == 0)");
                if (s.view.size() > 1)
                    fail(ErrorKind::value, "the truth value of a view of ", s.view.size(),
                         " elements is ambiguous (convert it with np.asarray(v) and use .any() or .all())");
                return PyObject_IsTrue(item_of(s, "bool()").ptr()) == 1;
            },
            nb::sig("def __bool__(self) -> bool"),
            "bool(v) of a view of one element, as NumPy; ValueError for none or several (ambiguous).")
        .def_prop_ro(
            "T", [](const PyView& s) { return derived(s, s.view.transpose()); }, nb::sig("def T(self) -> View"),
            "The view with its axes reversed (no copy), as NumPy's .T.")
        .def(
            "permute",
            [](const PyView& s, nb::args axes) {
                const std::vector<std::int64_t> list = int64_list_arg(single_sequence_or_args(axes).ptr(),
                                                                      "permute(): axes");
                std::vector<int> narrow(list.size());
                for (std::size_t i = 0; i < list.size(); ++i) {
                    // Range-checked before narrowing: 1 + 2**32 must not become axis 1.
                    if (list[i] < -s.view.ndim() || list[i] >= s.view.ndim())
                        fail(ErrorKind::value, "permute(): axis ", list[i], " is out of range for ", s.view.ndim(),
                             " dimensions");
                    narrow[i] = static_cast<int>(list[i]);
                }
                return derived(s, s.view.permute(narrow));
            },
            nb::sig("def permute(self, *axes: typing.SupportsIndex | collections.abc.Sequence[typing.SupportsIndex]) "
                    "-> View"),
            "The view with its axes in the order `axes` (v.permute(1, 0) or v.permute((1, 0)); negative axes count "
            "from the end), as torch.permute and NumPy's transpose(axes); no copy. ValueError for an axis out of range "
            "or repeated.")
        .def(
            "reshape",
            [](const PyView& s, nb::args shape) {
                return derived(s, s.view.reshape(
                                      int64_list_arg(single_sequence_or_args(shape).ptr(), "reshape(): shape")));
            },
            nb::sig("def reshape(self, *shape: typing.SupportsIndex | collections.abc.Sequence[typing.SupportsIndex]) "
                    "-> View"),
            "The same elements in C order with a new shape (v.reshape(2, 3) or v.reshape((2, 3)); one extent may be "
            "-1), without copying: a layout the new shape cannot be strided over is a ValueError (copy with "
            "v.contiguous() first).")
        .def(
            "squeeze",
            [](const PyView& s, nb::object axis) {
                if (axis.is_none()) return derived(s, s.view.squeeze());
                return derived(s, s.view.squeeze(axis_arg(axis.ptr(), s.view.ndim(), "squeeze(): axis")));
            },
            nb::arg("axis") = nb::none(), nb::sig("def squeeze(self, axis: int | None = None) -> View"),
            "The view without axes of extent 1 (all of them, or only `axis`, which must have extent 1); no copy.")
        .def("__repr__", &repr);
}

}  // namespace stridex::python
