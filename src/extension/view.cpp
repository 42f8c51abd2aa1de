// The stridex.View type: attributes, basic indexing (ints, slices, Ellipsis, None), .T, permute,
// reshape and repr. Protocol methods (__dlpack__, interfaces, buffer) are added by export.cpp.
#include <nanobind/stl/string.h>

#include <sstream>
#include <utility>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "export.hpp"
#include "py_owner.hpp"
#include "stream_policy.hpp"

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
    auto* slice = reinterpret_cast<PySliceObject*>(s.ptr());
    Slice out;
    out.step = step;
    // PySlice_Unpack turns None into sentinel extremes; keep None as "absent" for exact semantics.
    if (slice->start != Py_None) out.start = start;
    if (slice->stop != Py_None) out.stop = stop;
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
            nb::sig("def shape(self) -> tuple[int, ...]"))
        .def_prop_ro(
            "strides", [](const PyView& s) { return ints(s.view.strides()); },
            nb::sig("def strides(self) -> tuple[int, ...]"), "Strides in elements.")
        .def_prop_ro(
            "byte_strides", [](const PyView& s) { return ints(s.view.strides(), s.view.itemsize()); },
            nb::sig("def byte_strides(self) -> tuple[int, ...]"))
        .def_prop_ro("dtype", [](const PyView& s) { return s.view.dtype(); })
        .def_prop_ro("device", [](const PyView& s) { return s.view.device(); })
        .def_prop_ro("readonly", [](const PyView& s) { return s.view.readonly(); })
        .def_prop_ro(
            "writability", [](const PyView& s) { return writability_name(s.view.writability()); },
            "Where the read-only flag comes from: 'writable' or 'readonly' (the producer said so), "
            "'unknown' (it could not say: a legacy DLPack capsule; writable here) or 'immutable' "
            "(read-only by the producer's contract, unflagged in its own exports: JAX).")
        .def_prop_ro("size", [](const PyView& s) { return s.view.size(); })
        .def_prop_ro("ndim", [](const PyView& s) { return s.view.ndim(); })
        .def_prop_ro("itemsize", [](const PyView& s) { return s.view.itemsize(); })
        .def_prop_ro("nbytes", [](const PyView& s) { return s.view.nbytes(); })
        .def_prop_ro(
            "byte_span",
            [](const PyView& s) {
                const Span span = s.view.byte_span();
                return nb::make_tuple(span.lo, span.hi);
            },
            nb::sig("def byte_span(self) -> tuple[int, int]"),
            "(lo, hi): the bytes the elements occupy, relative to ptr (negative strides reach below it).")
        .def_prop_ro("is_c_contiguous", [](const PyView& s) { return s.view.layout().is_c_contiguous(); })
        .def_prop_ro("is_f_contiguous", [](const PyView& s) { return s.view.layout().is_f_contiguous(); })
        .def_prop_ro("is_dense", [](const PyView& s) { return s.view.layout().is_dense(); })
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
        .def("__len__",
             [](const PyView& s) {
                 if (s.view.ndim() == 0) fail(ErrorKind::type, "len() of a 0-d view");
                 return s.view.shape()[0];
             })
        .def(
            "__getitem__", [](const PyView& s, nb::handle key) { return derived(s, index_view(s.view, key)); },
            nb::arg("key").none(),
            nb::sig("def __getitem__(self, key: typing.SupportsIndex | slice | types.EllipsisType | None | "
                    "tuple[typing.SupportsIndex | slice | types.EllipsisType | None, ...], /) -> View"))
        .def_prop_ro(
            "T", [](const PyView& s) { return derived(s, s.view.transpose()); }, nb::sig("def T(self) -> View"))
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
                    "-> View"))
        .def(
            "reshape",
            [](const PyView& s, nb::args shape) {
                return derived(s, s.view.reshape(
                                      int64_list_arg(single_sequence_or_args(shape).ptr(), "reshape(): shape")));
            },
            nb::sig("def reshape(self, *shape: typing.SupportsIndex | collections.abc.Sequence[typing.SupportsIndex]) "
                    "-> View"))
        .def(
            "squeeze",
            [](const PyView& s, nb::object axis) {
                if (axis.is_none()) return derived(s, s.view.squeeze());
                return derived(s, s.view.squeeze(axis_arg(axis.ptr(), s.view.ndim(), "squeeze(): axis")));
            },
            nb::arg("axis") = nb::none(), nb::sig("def squeeze(self, axis: int | None = None) -> View"))
        .def("__repr__", &repr);
}

}  // namespace stridex::python
