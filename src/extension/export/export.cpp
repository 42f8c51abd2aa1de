// Export of stridex.View: __dlpack__, __dlpack_device__, __cuda_array_interface__,
// __array_interface__ and __array__ (the buffer protocol is in export_buffer.cpp, the C exchange
// API in exchange_api.cpp). The decisions are written down once, in docs/export.md.
//
// The DLPack entry points are plain CPython vectorcall methods, not nanobind functions: they are
// the hot path of every `from_dlpack(view)`, and keyword parsing against interned names costs a few
// pointer compares. Everything they call is C++; no Python code runs on export.
#include "export/export.hpp"

#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <type_traits>

#include "common/arguments.hpp"
#include "common/attributes.hpp"
#include "common/bindings.hpp"
#include "common/limited_api.hpp"
#include "common/names.hpp"
#include "export/allocator.hpp"
#include "sanitizer/handover.hpp"
#include "sanitizer/sanitizer.hpp"
#include "stream/stream_policy.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/stream.hpp"

namespace nb = nanobind;

namespace stridex::python {

namespace {

using dlpack::kLegacyCapsule, dlpack::kUsedLegacyCapsule, dlpack::kUsedVersionedCapsule, dlpack::kVersionedCapsule;

// ---- capsules ---------------------------------------------------------------------------------
// The two kinds, versioned ("dltensor_versioned", DLManagedTensorVersioned) and legacy
// ("dltensor", DLManagedTensor), as one template over which: the same steps for both, each
// spelling chosen at compile time (as nanobind's nb_ndarray.cpp does for its capsule helpers).

template <bool Versioned>
using Managed = std::conditional_t<Versioned, dlpack::DLManagedTensorVersioned, dlpack::DLManagedTensor>;
template <bool Versioned>
constexpr const char* kCapsuleName = Versioned ? kVersionedCapsule : kLegacyCapsule;
template <bool Versioned>
constexpr const char* kUsedCapsuleName = Versioned ? kUsedVersionedCapsule : kUsedLegacyCapsule;

// Runs the deleter of an unconsumed capsule. A capsule may die while an exception is propagating
// (the consumer failed half-way), so the pending exception is saved around the deleter, and any
// error the capsule access itself raises is reported as unraisable rather than replacing it.
template <bool Versioned>
void capsule_destructor(PyObject* capsule) noexcept {
    if (PyCapsule_IsValid(capsule, kUsedCapsuleName<Versioned>)) return;  // consumed: the consumer owns the deleter
    const nb::error_scope keep_pending_exception;
    auto* managed = static_cast<Managed<Versioned>*>(PyCapsule_GetPointer(capsule, kCapsuleName<Versioned>));
    if (managed == nullptr)
        PyErr_WriteUnraisable(capsule);
    else if (managed->deleter)
        managed->deleter(managed);
}

// A capsule around a fresh export of `view`; a legacy capsule carries no flags, so `extra_flags`
// reaches versioned capsules only.
template <bool Versioned>
PyObject* make_capsule(const View& view, std::uint64_t extra_flags) {
    Managed<Versioned>* t = nullptr;
    if constexpr (Versioned)
        t = dlpack::export_versioned(view, extra_flags);
    else
        t = dlpack::export_legacy(view);
    PyObject* capsule = PyCapsule_New(t, kCapsuleName<Versioned>, &capsule_destructor<Versioned>);
    if (capsule == nullptr) {
        nb::python_error error;  // fetched first: the deleter may run Python code
        t->deleter(t);
        throw error;
    }
    return capsule;
}

// ---- argument parsing -------------------------------------------------------------------------

bool is_none(PyObject* o) noexcept { return o == nullptr || o == Py_None; }

// A pair of ints, as a tuple (or list): max_version.
std::pair<long long, long long> int_pair(PyObject* o, const char* what) {
    if (!PyTuple_Check(o) && !PyList_Check(o))
        fail(ErrorKind::type, what, " must be a tuple of two ints, found ", type_name(o));
    if (PySequence_Fast_GET_SIZE(o) != 2)
        fail(ErrorKind::type, what, " must be a tuple of two ints, found ", PySequence_Fast_GET_SIZE(o), " items");
    return {int64_arg(PySequence_Fast_GET_ITEM(o, 0), what), int64_arg(PySequence_Fast_GET_ITEM(o, 1), what)};
}

// The consumer's stream; nullopt for None. 0 and values below -1 are ValueError whatever the device.
std::optional<std::intptr_t> consumer_stream(PyObject* o) {
    if (is_none(o)) return std::nullopt;
    return stream_int_arg(o, "__dlpack__: stream", /*allow_no_sync=*/true);
}

bool parse_max_version(PyObject* o) {
    if (is_none(o)) return false;  // a consumer that sends nothing reads only legacy capsules
    const auto [major, minor] = int_pair(o, "__dlpack__: max_version");
    (void)minor;  // any minor of major 1 reads a 1.x capsule: a new minor only adds enum values
    return major >= 1;
}

// Any device spelling (arguments.hpp's device_arg, as for device= everywhere): a (device_type,
// device_id) tuple as the protocol sends it, a stridex.Device or a name; the same errors.
std::optional<Device> parse_dl_device(PyObject* o) {
    if (is_none(o)) return std::nullopt;
    return device_arg(o, "__dlpack__: dl_device", /*ints_are_cuda_ordinals=*/false);
}

std::optional<bool> parse_copy(PyObject* o) {
    if (is_none(o)) return std::nullopt;
    if (o == Py_True) return true;
    if (o == Py_False) return false;
    fail(ErrorKind::type, "__dlpack__: copy must be True, False or None, found ", type_name(o));
}

// ---- __dlpack__ ---------------------------------------------------------------------------------

struct DlpackArgs {
    PyObject* stream = nullptr;
    PyObject* max_version = nullptr;
    PyObject* dl_device = nullptr;
    PyObject* copy = nullptr;
};

// The semantics of one __dlpack__ call (docs/export.md, "__dlpack__"):
//   target = dl_device or the view's device;
//   host-accessible memory (pinned, managed) asked for as CPU is relabelled, not copied;
//   copy=True, or a target the memory cannot be read on, copies through the copy engine to the
//   target (IS_COPIED): ordered on the consumer's stream for a CUDA target, complete on return
//   for a host target;
//   the consumer's stream is ordered after the view's stream with an event; host consumers of
//   CUDA host memory with pending work get a host sync, which is the only order they can see.
PyObject* dlpack_export(PyObject* self, const DlpackArgs& a) {
    const View& v = py_view(self).view;
    const std::optional<std::intptr_t> stream = consumer_stream(a.stream);
    require_dlpack_dtype(v);
    const bool asked_versioned = parse_max_version(a.max_version);
    const std::optional<Device> requested = parse_dl_device(a.dl_device);
    const std::optional<bool> copy = parse_copy(a.copy);

    const Device source = v.device();
    const Device target = requested.value_or(source);
    const bool relabel = target != source && target == Device::cpu() && source.host_accessible();
    const bool needs_copy = target != source && !relabel;
    if (needs_copy && copy == false)
        fail(ErrorKind::buffer, "__dlpack__: copy=False, but ", source.name(), " memory can only reach ", target.name(),
             " through a copy");
    const bool copying = needs_copy || copy == true;
    // A view whose producer could not say whether it is writable (a legacy capsule) answers with a
    // legacy capsule whatever was asked, so each consumer applies its own rule for those, as it
    // would to the producer itself (NumPy: read-only). Copies are the consumer's: as asked.
    const bool versioned = asked_versioned && (copying || v.writability() != Writability::unknown);

    // The stream belongs to the consumer's device (the target): CUDA devices take stream values,
    // every other device only "none" (None) or "no synchronization" (-1).
    if (stream && *stream != kNoStream && !target.is_cuda_family())
        fail(ErrorKind::buffer, "__dlpack__: stream ", *stream, " for a ", target.name(),
             " consumer; devices without CUDA streams take only stream=None (or -1)");

    if (copying) {
        if (source.host_accessible() && target == Device::cpu()) {
            host_sync(v);  // the copy reads on the host
            return dlpack_capsule(host_copy(v), versioned, dlpack::kFlagIsCopied);
        }
        // A CUDA consumer gets the copy queued on its stream (None: the legacy default stream; -1:
        // it synchronizes itself, so the copy completes first); a host consumer gets it complete.
        const std::intptr_t on = target.is_cuda_device_or_managed() ? stream.value_or(kDefaultStream) : kNoStream;
        View out;
        try {
            // The process default allocator (stridex.set_allocator): the protocol has no argument for it.
            std::optional<PyAllocator> holder;
            const Allocator* allocator = choose_allocator(nb::none(), nb::none(), holder);
            nb::gil_scoped_release release;
            out = copy_to(v, target, Order::C, on, allocator);
        } catch (const Error& e) {
            // Unservable here (no driver, no such GPU, ...): the protocol's refusal is BufferError.
            fail(ErrorKind::buffer, "__dlpack__: copying ", source.name(), " memory to ", target.name(), ": ",
                 e.what());
        }
        return dlpack_capsule(out, versioned, dlpack::kFlagIsCopied);
    }
    if (relabel) {
        if (!stream) host_sync(v);  // a CPU consumer; -1 means it takes care of that itself
        const View out(v.data(), v.byte_offset(), v.layout(), v.dtype(), Device::cpu(), v.writability(), v.owner(),
                       v.subbyte_padded());
        return dlpack_capsule(out, versioned, 0);
    }
    const bool unordered = stream == kNoStream;
    const Handover handover{v,
                            py_view(self).source.ptr(),
                            v.stream(),
                            unordered ? kNoStream : stream.value_or(cuda::StreamRef::kLegacy),
                            "View.__dlpack__",
                            HandoverFlags{}.with(HandoverFlag::no_sync, unordered)};
    if (sanitizer::on()) sanitizer::observe(handover);
    handed_to_stream(handover);
    if (source.is_cuda_family() && (v.stream() != kNoStream || v.pending())) {
        if (!stream && source.host_accessible())
            host_sync(v);  // None: maybe a host reader (torch reads pinned memory as CPU memory)
        else {             // the consumer's stream waits for the View's stream and its Pending (an IPC event)
            const cuda::StreamRef consumer(stream.value_or(cuda::StreamRef::kLegacy));
            cuda::order(v, consumer);
            // A consumer capturing a graph uses the memory at every replay: the View's owner stays
            // alive as long as the graph (capture.hpp).
            if (consumer != cuda::StreamRef::legacy())
                cuda::keep_alive_in_capture(cuda::capture_of(consumer,
                                                             source.type == DeviceType::kCUDA ? source.id : 0),
                                            v.owner());
        }
    }
    return dlpack_capsule(v, versioned, 0);
}

PyObject* dlpack_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) noexcept {
    if (nargs != 0) {
        PyErr_Format(PyExc_TypeError,
                     "__dlpack__() takes no positional arguments (keyword-only: stream, max_version, dl_device, copy), "
                     "but %zd were given",
                     nargs);
        return nullptr;
    }
    DlpackArgs a;
    if (kwnames != nullptr) {
        const Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < n; ++i) {
            PyObject* name = PyTuple_GET_ITEM(kwnames, i);
            PyObject* value = args[i];
            PyObject** slot = nullptr;
            if (name == names.stream)
                slot = &a.stream;
            else if (name == names.max_version_kw)
                slot = &a.max_version;
            else if (name == names.dl_device)
                slot = &a.dl_device;
            else if (name == names.copy)
                slot = &a.copy;
            // Not interned (built at run time, e.g. **{"str" + "eam": ...}): compare the text.
            else if (PyUnicode_Compare(name, names.stream) == 0)
                slot = &a.stream;
            else if (PyUnicode_Compare(name, names.max_version_kw) == 0)
                slot = &a.max_version;
            else if (PyUnicode_Compare(name, names.dl_device) == 0)
                slot = &a.dl_device;
            else if (PyUnicode_Compare(name, names.copy) == 0)
                slot = &a.copy;
            if (slot == nullptr) {
                PyErr_Format(PyExc_TypeError,
                             "__dlpack__() got an unexpected keyword argument '%U' (it takes stream, max_version, "
                             "dl_device and copy)",
                             name);
                return nullptr;
            }
            *slot = value;
        }
    }
    try {
        return dlpack_export(self, a);
    } catch (...) {
        set_python_error_from_current_exception();
        return nullptr;
    }
}

PyObject* dlpack_device_method(PyObject* self, PyObject*) noexcept {
    Device d;
    try {
        d = py_view(self).view.device();
    } catch (...) {
        set_python_error_from_current_exception();
        return nullptr;
    }
    PyObject* type = PyLong_FromLong(static_cast<long>(d.type));
    PyObject* id = type ? PyLong_FromLong(d.id) : nullptr;
    PyObject* out = id ? PyTuple_Pack(2, type, id) : nullptr;
    Py_XDECREF(type);
    Py_XDECREF(id);
    return out;
}

PyMethodDef g_dlpack_def{
    "__dlpack__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&dlpack_method)),
    METH_FASTCALL | METH_KEYWORDS,
    "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
    "A DLPack capsule of this view: versioned (\"dltensor_versioned\", DLPack 1.3) when max_version >= (1, 0), "
    "legacy (\"dltensor\") otherwise, and for views whose producer could not say whether they are writable. "
    "READ_ONLY is set for read-only views; a legacy capsule cannot carry it, so views a producer said read-only "
    "refuse to leave as one (BufferError), while immutable views (JAX) leave unflagged as the producer's own do. "
    "copy=True, or a dl_device the memory cannot be read on, gives a copy on dl_device (or the view's own "
    "device) flagged IS_COPIED, made by the copy engine and queued on the consumer's stream for a CUDA target. The "
    "consumer's stream is ordered after the view's pending work with an event (None: legacy default stream, -1: "
    "no ordering, 0: ValueError)."};

PyMethodDef g_dlpack_device_def{
    "__dlpack_device__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&dlpack_device_method)),
    METH_NOARGS, "__dlpack_device__($self, /)\n--\n\n(device_type, device_id) of the memory, as in the capsule."};

// ---- interfaces ---------------------------------------------------------------------------------

// The typestr of a view for the interfaces; nullopt when the dtype has none (bfloat16, float8/6/4,
// int4, vector types): those consumers then fall back to __dlpack__ (docs/export.md). Opaque
// elements give the producer's own typestr (NumPy records: '|V12'), else '|V<itemsize>'.
std::optional<std::string> interface_typestr(const PyView& pv) {
    const View& v = pv.view;
    if (v.dtype().is_opaque_bytes()) {
        PyObject* typestr = element_description(pv, "typestr");
        const char* text = typestr && PyUnicode_Check(typestr) ? PyUnicode_AsUTF8(typestr) : nullptr;
        if (!text) clear_exception_or_throw();
        return text ? std::string(text) : v.dtype().typestr();
    }
    if (v.is_packed_subbyte() || v.dtype().lanes != 1) return std::nullopt;
    try {
        return v.dtype().typestr();
    } catch (const Error&) {
        return std::nullopt;
    }
}

// Keys the two interfaces share: shape, typestr, descr (the producer's own for opaque elements: the
// fields of NumPy records), strides (None when C-contiguous, else bytes), data (pointer of element
// 0, the producer's own even when empty) and version 3.
nb::dict interface_dict(const PyView& pv, const std::string& typestr) {
    const View& v = pv.view;
    nb::dict d;
    d["shape"] = nb::steal(int_tuple(v.shape()));
    d["typestr"] = typestr;
    if (PyObject* descr = element_description(pv, "descr"); descr && descr != Py_None) {
        // A fresh list, as NumPy gives: a consumer editing it must not edit the View's description.
        nb::object copy = PyList_Check(descr) ? nb::steal(PyList_GetSlice(descr, 0, PyList_GET_SIZE(descr)))
                                              : nb::borrow(descr);
        if (!copy.is_valid()) throw nb::python_error();
        d["descr"] = copy;
    } else {
        nb::list descr_list;
        descr_list.append(nb::make_tuple("", typestr));
        d["descr"] = descr_list;
    }
    d["strides"] = v.layout().is_c_contiguous() ? nb::none() : nb::steal(int_tuple(v.strides(), v.itemsize()));
    d["data"] = nb::make_tuple(nb::int_(reinterpret_cast<std::uintptr_t>(v.ptr())), nb::bool_(v.readonly()));
    d["version"] = 3;
    return d;
}

PyObject* attribute_error(const std::string& message) noexcept {
    PyErr_SetString(PyExc_AttributeError, message.c_str());
    return nullptr;
}

PyObject* cuda_array_interface_get(PyObject* self, void*) noexcept {
    try {
        const PyView& pv = py_view(self);
        const View& v = pv.view;
        // AttributeError, not another error: consumers probe with hasattr/getattr and must fall
        // through to the array interface or DLPack for memory CUDA kernels cannot take as is.
        if (!v.device().is_cuda_device_or_managed())
            return attribute_error("__cuda_array_interface__: this stridex.View is " + v.device().name() +
                                   " memory, not CUDA device or managed memory; use __dlpack__ or "
                                   "__array_interface__");
        const std::optional<std::string> typestr = interface_typestr(pv);
        if (!typestr)
            return attribute_error("__cuda_array_interface__: dtype " + v.dtype().name() +
                                   " has no typestr; use __dlpack__");
        nb::dict d = interface_dict(pv, *typestr);
        // The stream the data is ready on: consumers wait on it. Never 0 (forbidden), which a
        // View cannot hold (StreamValue). A View ready after an IPC event says the legacy default
        // stream, which waits for the event now: the consumer is taking the View (ready_stream).
        const std::intptr_t ready = cuda::ready_stream(v).encoded();
        d["stream"] = ready == kNoStream ? nb::none() : nb::object(nb::int_(ready));
        return d.release().ptr();
    } catch (...) {
        set_python_error_from_current_exception();
        return nullptr;
    }
}

PyObject* array_interface_get(PyObject* self, void*) noexcept {
    try {
        const PyView& pv = py_view(self);
        const View& v = pv.view;
        if (!v.device().host_accessible())
            return attribute_error("__array_interface__: this stridex.View is " + v.device().name() +
                                   " memory, which the CPU cannot read; use __dlpack__ or __cuda_array_interface__");
        const std::optional<std::string> typestr = interface_typestr(pv);
        if (!typestr)
            return attribute_error("__array_interface__: dtype " + v.dtype().name() +
                                   " has no typestr; use __dlpack__ or numpy.asarray (through __array__)");
        host_sync(v);  // the reader is the host
        return interface_dict(pv, *typestr).release().ptr();
    } catch (...) {
        set_python_error_from_current_exception();
        return nullptr;
    }
}

PyGetSetDef g_cai_def{"__cuda_array_interface__", &cuda_array_interface_get, nullptr,
                      "CUDA array interface v3 (CUDA device and managed memory only; AttributeError otherwise).",
                      nullptr};
PyGetSetDef g_ai_def{"__array_interface__", &array_interface_get, nullptr,
                     "NumPy array interface v3 (host-accessible memory only; AttributeError otherwise).", nullptr};

// __array__: NumPy's last resort after the buffer protocol and __array_interface__, reached for
// the dtypes those cannot describe (bfloat16, float8 ...: an unsigned integer array of the same
// width, then viewed as the ml_dtypes type) and for device memory (a clear error instead of a 0-d
// object array).
nb::object array_method(nb::handle self, nb::handle dtype, nb::handle copy) {
    if (!py_view(self.ptr()).view.device().host_accessible()) {
        // Only an explicit copy crosses devices (np.array(v) asks for one; np.asarray(v) does not),
        // as CuPy and torch refuse implicit device-to-host conversions.
        if (!copy.is(Py_True))
            fail(ErrorKind::type, "cannot make a NumPy array of ", py_view(self.ptr()).view.device().name(),
                 " memory without a copy to the host: use numpy.array(view), numpy.from_dlpack(view, device='cpu') "
                 "or view.to('cpu')");
        View host;
        {
            nb::gil_scoped_release release;
            host = copy_to(py_view(self.ptr()).view, Device::cpu(), Order::C, kNoStream);
        }
        return array_method(wrap_view(std::move(host), nb::none()), dtype, Py_None);
    }
    const PyView& pv = py_view(self.ptr());
    const View& v = pv.view;
    if (v.is_packed_subbyte())
        fail(ErrorKind::buffer, "packed ", v.dtype().name(), " has no NumPy representation (one element a byte)");
    if (v.dtype().lanes != 1)
        fail(ErrorKind::buffer, "vector dtype ", v.dtype().name(), " has no NumPy representation");
    nb::module_ numpy = nb::module_::import_("numpy");
    std::optional<std::string> typestr = interface_typestr(pv);
    const bool retype = !typestr;
    if (retype) {
        const std::int64_t size = v.itemsize();
        if (size != 1 && size != 2 && size != 4 && size != 8)
            fail(ErrorKind::buffer, "dtype ", v.dtype().name(), " has no NumPy representation");
        typestr = (size == 1 ? std::string("|u") : std::string("<u")) + std::to_string(size);
    }
    host_sync(v);
    nb::object holder = nb::module_::import_("types").attr("SimpleNamespace")();
    holder.attr("__array_interface__") = interface_dict(pv, *typestr);
    holder.attr("view") = self;  // the array's base keeps the view, and so the memory, alive
    nb::object array = numpy.attr("asarray")(holder);
    if (retype) array = array.attr("view")(self.attr("dtype").attr("numpy"));
    const bool copy_true = copy.is(Py_True);
    if (!dtype.is_none()) {
        nb::object wanted = numpy.attr("dtype")(dtype);
        if (!array.attr("dtype").equal(wanted)) {
            if (copy.is(Py_False))
                fail(ErrorKind::value, "__array__: copy=False, but dtype ", nb::str(wanted).c_str(),
                     " needs a conversion of ", v.dtype().name());
            return array.attr("astype")(wanted);
        }
    }
    if (copy_true) return array.attr("copy")();
    return array;
}

}  // namespace

PyObject* element_description(const PyView& view, const char* key) noexcept {
    if (!view.element.is_valid() || !PyDict_Check(view.element.ptr())) return nullptr;
    return PyDict_GetItemString(view.element.ptr(), key);  // borrowed; never raises
}

void require_dlpack_dtype(const View& view) {
    if (view.dtype().is_opaque_bytes())
        fail(ErrorKind::buffer, "an opaque element of ", view.itemsize(),
             " bytes (a void or structured dtype, such as NumPy records) has no DLPack dtype: DLPack describes "
             "numbers only; use __array_interface__, __cuda_array_interface__ or the buffer protocol");
}

PyObject* dlpack_capsule(const View& view, bool versioned, std::uint64_t extra_flags) {
    return versioned ? make_capsule<true>(view, extra_flags) : make_capsule<false>(view, extra_flags);
}

void host_sync(const View& view) {
    if ((view.stream() == kNoStream && !view.pending()) || !view.device().is_cuda_family()) return;
    // A host wait for work still being captured would wait for nothing and end the capture.
    if (view.stream() != kNoStream) {
        const cuda::StreamRef pending(view.stream());
        if (const cuda::Capture c = cuda::capture_of(pending, view.device().id); c.capturing())
            cuda::refuse_in_capture(
                "exporting a View to a host reader", pending, c,
                "the host would wait for work captured into a graph, which runs only when launched");
    }
    nb::gil_scoped_release release;  // other Python threads may run while the GPU finishes
    cuda::wait_on_host(view);
}

void bind_export(nb::module_& /*module: every export is an attribute of the View type*/) {
    if (!view_type()) fail(ErrorKind::value, "bind_export: stridex.View must be bound before export");
    nb::handle cls(reinterpret_cast<PyObject*>(view_type()));

    auto add = [&](const char* name, PyObject* descriptor) {
        if (!descriptor) throw nb::python_error();
        nb::object owned = nb::steal(descriptor);
        cls.attr(name) = owned;
    };
    add("__dlpack__", PyDescr_NewMethod(view_type(), &g_dlpack_def));
    add("__dlpack_device__", PyDescr_NewMethod(view_type(), &g_dlpack_device_def));
    add("__cuda_array_interface__", PyDescr_NewGetSet(view_type(), &g_cai_def));
    add("__array_interface__", PyDescr_NewGetSet(view_type(), &g_ai_def));
    cls.attr(
        "__array__") = nb::cpp_function(&array_method, nb::is_method(), nb::name("__array__"), nb::scope(cls),
                                        nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none(),
                                        nb::sig("def __array__(self, dtype: numpy.dtype[typing.Any] | None = None, "
                                                "copy: bool | None = None) -> numpy.typing.NDArray[typing.Any]"),
                                        "NumPy conversion (zero-copy for host memory; bfloat16 and float8 "
                                        "through ml_dtypes).");
    cls.attr("_with_stream") = nb::cpp_function(
        [](const PyView& self, nb::handle stream) {
            View v = self.view;
            v.set_stream(stream_int_arg(stream.ptr(), "View._with_stream(): stream", /*allow_no_sync=*/true));
            return wrap_view(std::move(v), self.source, self.element);
        },
        nb::is_method(), nb::name("_with_stream"), nb::scope(cls), nb::arg("stream").none(),
        nb::sig("def _with_stream(self, stream: typing.SupportsIndex) -> View"),
        "The same view, ready on `stream` (DLPack encoding; -1: nothing pending). For stridex's C++ casters, "
        "which bring a C++ View's pending stream along.");
    bind_exchange_api(cls);
}

}  // namespace stridex::python
