// What the nanobind and pybind11 casters share: everything but the binding library, on PyObject*.
//
// Extension authors include <stridex/python/nanobind.hpp> or <stridex/python/pybind11.hpp>; this
// header holds the argument and return types they bind and the conversions both use:
//
//   stridex::View               any array stridex.view() accepts, or a stridex.View -> a View
//   stridex::Arg<constraints>   the same, checked against typed constraints (cuda/arg.hpp, cuda/constraints.hpp)
//   stridex::Array / View       returned as a stridex.View, on the device of the memory itself
//   stridex::Like               returned in the framework of an argument: like(x, out)
//
// The extension and the stridex wheel are separate modules, possibly built by different compilers
// with different stridex versions, so nothing C++ crosses between them: values travel as DLPack
// structs through versioned C tables. Arguments go through the wheel's caster API (caster_api.hpp:
// stridex.view()'s import written into a C struct with a release callback by import_array, or
// into a DLPack tensor by a minor-0 wheel's import_tensor; no Python object on the way) and returns
// through its view_from_tensor; when the wheel has no caster API of our major, through
// stridex.view() and stridex.View's C exchange API, and when that does not match either, through a
// versioned capsule.
//
// The stream contract is stridex.view()'s (docs/import.md): an argument is imported with
// stridex.view(obj), so a CUDA producer's pending work is ordered before the legacy default stream
// (an event, no host block) and View::stream() says 1; host memory says kNoStream. With
// arg::caller_stream the argument is ordered on the calling framework's current stream instead
// (asked through the DLPack exchange API of the argument's type: torch >= 2.10), and
// View::stream() is that stream: launch your kernels there. docs/extensions.md has the details.
//
// Link the extension with stridex::stridex (the casters use dlpack import/export and the driver).
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "stridex/cuda/arg.hpp"
#include "stridex/cuda/array.hpp"
#include "stridex/cuda/constraints.hpp"
#include "stridex/cuda/from_pointer.hpp"
#include "stridex/dlpack.hpp"
#include "stridex/python/caster_api.hpp"
#include "stridex/python/errors.hpp"
#include "stridex/python/framework_of.hpp"
#include "stridex/view.hpp"

namespace stridex {

// A View to return in the framework of an argument (torch in, torch out), through that
// framework's own from_dlpack. Holds `input` borrowed: return it from the call that received it.
struct Like {
    View view;
    PyObject* like = nullptr;
};
inline Like like(const ArgBase& input, View view) { return Like{std::move(view), input.source()}; }

namespace interop {

// Thrown where a Python error is set already.
struct PythonError {};

// An owned reference.
class Ref {
public:
    Ref() = default;
    explicit Ref(PyObject* p) noexcept : p_(p) {}  // steals
    Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    Ref& operator=(Ref o) noexcept {
        std::swap(p_, o.p_);
        return *this;
    }
    ~Ref() { Py_XDECREF(p_); }
    static Ref borrow(PyObject* p) noexcept {
        Py_XINCREF(p);
        return Ref(p);
    }
    PyObject* get() const noexcept { return p_; }
    PyObject* release() noexcept { return std::exchange(p_, nullptr); }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    PyObject* p_ = nullptr;
};

inline Ref checked(PyObject* p) {
    if (!p) throw PythonError{};
    return Ref(p);
}

// What the casters need of the stridex Python module, looked up once (under the GIL). A plain
// pointer rather than a function-local static object: the lookup imports a module, which may
// release the GIL, and a C++ static guard held across that can deadlock with another thread.
struct Link {
    PyObject* view_type = nullptr;  // stridex.View
    PyObject* view_fn = nullptr;    // stridex.view
    // Attribute names, interned once rather than made from C strings on every call.
    PyObject* stream_name = nullptr;                 // "stream"
    PyObject* dlpack_device_name = nullptr;          // "__dlpack_device__"
    PyObject* exchange_api_name = nullptr;           // "__dlpack_c_exchange_api__" (DLPack 1.3, a capsule)
    PyObject* with_stream_name = nullptr;            // "_with_stream"
    const dlpack::DLPackExchangeAPI* api = nullptr;  // nullptr when the API's major is not ours
    const python::CasterApi* caster_api = nullptr;   // nullptr when absent or of another major
};

// The DLPack exchange API of major 1 that `type` offers as a 1.3 capsule, or nullptr. Only the
// capsule is read here: the 1.2 spelling is a plain int, which any Python class can set to any
// address, and only the stridex wheel checks such an address before use (docs/import.md). The
// casters ask the wheel for the caller's stream where it can (kImportCallerStream, minor 2); this
// lookup serves stridex.View itself and older wheels.
inline const dlpack::DLPackExchangeAPI* exchange_api_of(PyObject* type, const Link& l) {
    const dlpack::DLPackExchangeAPI* api = nullptr;
    if (Ref capsule{PyObject_GetAttr(type, l.exchange_api_name)})
        api = static_cast<const dlpack::DLPackExchangeAPI*>(
            PyCapsule_GetPointer(capsule.get(), dlpack::kExchangeApiCapsule));
    PyErr_Clear();
    while (api && api->header.version.major > dlpack::kMajorVersion)
        api = reinterpret_cast<const dlpack::DLPackExchangeAPI*>(api->header.prev_api);
    return api && api->header.version.major == dlpack::kMajorVersion ? api : nullptr;
}

// The caster API in `capsule` if the casters compiled here can use it: our major, and every slot
// we call present. nullptr otherwise (no Python error set).
inline const python::CasterApi* caster_api_of(PyObject* capsule) noexcept {
    auto* api = static_cast<const python::CasterApi*>(PyCapsule_GetPointer(capsule, python::kCasterApiCapsule));
    if (api == nullptr) {
        PyErr_Clear();
        return nullptr;
    }
    if (api->major != python::kCasterApiMajor || api->size < python::kCasterApiSizeMinor0) return nullptr;
    return api;
}

// The table's import_array if it has one (minor >= 1: its size covers the slot), else nullptr.
inline python::StridexImportArray import_array_of(const python::CasterApi& api) noexcept {
    return api.size >= offsetof(python::CasterApi, import_array) + sizeof(api.import_array) ? api.import_array
                                                                                            : nullptr;
}

inline Link* link() {
    static Link* cached = nullptr;  // constant-initialised: no guard
    if (cached) return cached;
    Ref module = checked(PyImport_ImportModule("stridex"));
    Ref type = checked(PyObject_GetAttrString(module.get(), "View"));
    Ref fn = checked(PyObject_GetAttrString(module.get(), "view"));
    Ref names[] = {checked(PyUnicode_InternFromString("stream")),
                   checked(PyUnicode_InternFromString("__dlpack_device__")),
                   checked(PyUnicode_InternFromString("__dlpack_c_exchange_api__")),
                   checked(PyUnicode_InternFromString("_with_stream"))};
    // An older wheel has no caster API: the Python path then.
    Ref caster_api{PyObject_GetAttrString(module.get(), "_stridex")};
    if (caster_api) caster_api = Ref{PyObject_GetAttrString(caster_api.get(), "_caster_api")};
    PyErr_Clear();
    auto* l = new Link();  // kept for the life of the process, as are the references
    l->stream_name = names[0].release();
    l->dlpack_device_name = names[1].release();
    l->exchange_api_name = names[2].release();
    l->with_stream_name = names[3].release();
    l->api = exchange_api_of(type.get(), *l);
    if (caster_api) l->caster_api = caster_api_of(caster_api.release());  // the module keeps it alive too
    l->view_type = type.release();
    l->view_fn = fn.release();
    cached = l;
    return l;
}

inline bool is_stridex_view(PyObject* obj) {
    return PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(link()->view_type));
}

// stridex.View.stream as an int (kNoStream for None).
inline std::intptr_t stream_of(PyObject* view) {
    Ref stream = checked(PyObject_GetAttr(view, link()->stream_name));
    if (stream.get() == Py_None) return kNoStream;
    const Py_ssize_t value = PyLong_AsSsize_t(stream.get());
    if (value == -1 && PyErr_Occurred()) throw PythonError{};
    return static_cast<std::intptr_t>(value);
}

// A versioned capsule's tensor, taken over (renamed used_*, as the protocol wants).
inline View import_capsule(PyObject* capsule) {
    auto* t = static_cast<dlpack::DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, dlpack::kVersionedCapsule));
    if (t == nullptr) throw PythonError{};
    if (PyCapsule_SetName(capsule, dlpack::kUsedVersionedCapsule) != 0) throw PythonError{};
    return dlpack::import_managed(t);
}

// A stridex.View (Python) whose stream is `stream` -> a View (C++) of the same memory and stream,
// with no ordering of its own: stridex.view() did that already.
inline View from_stridex_view(PyObject* obj, std::intptr_t stream) {
    Link* l = link();
    View view;
    if (l->api) {
        dlpack::DLManagedTensorVersioned* t = nullptr;
        if (l->api->managed_tensor_from_py_object_no_sync(obj, &t) != 0) throw PythonError{};
        view = dlpack::import_managed(t);
    } else {
        // An older stridex.View: __dlpack__(stream=-1) exports without ordering anything.
        Ref method = checked(PyObject_GetAttrString(obj, "__dlpack__"));
        Ref kwargs = checked(Py_BuildValue("{s:i,s:(ii)}", "stream", static_cast<int>(kNoStream), "max_version",
                                           dlpack::kMajorVersion, dlpack::kMinorVersion));
        Ref args = checked(PyTuple_New(0));
        Ref capsule = checked(PyObject_Call(method.get(), args.get(), kwargs.get()));
        view = import_capsule(capsule.get());
    }
    view.set_stream(stream);
    return view;
}

// exchange_api_of(type), remembered per type while the type is unchanged, so that an argument of a
// type without one (NumPy) does not pay two failed attribute lookups on every call. CPython resets
// a type's tp_version_tag whenever the type or a base is modified and never reuses a tag (the
// wheel's per-type cache, src/extension/import/import_type_cache.hpp, relies on the same); a type without a tag is
// looked up every time. An entry holds a strong reference to its type, so that its address cannot
// be taken by another type while cached. Under the GIL, as everything here.
inline const dlpack::DLPackExchangeAPI* exchange_api_of_type(PyTypeObject* type, const Link& l) {
    struct Entry {
        PyTypeObject* type;
        unsigned int tag;
        const dlpack::DLPackExchangeAPI* api;
    };
    static Entry cache[8];  // constant-initialised: no guard; direct-mapped by address
    Entry& e = cache[(reinterpret_cast<std::uintptr_t>(type) >> 4) & 7];
    if (e.type == type && e.tag != 0 && e.tag == type->tp_version_tag) return e.api;
    const dlpack::DLPackExchangeAPI* api = exchange_api_of(reinterpret_cast<PyObject*>(type), l);
    // The lookup assigned the type a tag, if it can have one (3.12 assigns on request).
#if PY_VERSION_HEX >= 0x030C0000
    if (type->tp_version_tag == 0) PyUnstable_Type_AssignVersionTag(type);
#endif
    if (const unsigned int tag = type->tp_version_tag; tag != 0) {
        PyTypeObject* old = e.type;
        Py_INCREF(type);
        e = Entry{type, tag, api};
        Py_XDECREF(old);  // after the entry is consistent: freeing a type may run code
    }
    return api;
}

// The stream the framework of `obj` currently works on, for obj's CUDA device, as a Python int in
// the protocol encoding; a null Ref when obj's type has no exchange API or obj is not on a GPU.
inline Ref caller_stream_of(PyObject* obj) {
    Link* l = link();
    const dlpack::DLPackExchangeAPI* api = exchange_api_of_type(Py_TYPE(obj), *l);
    if (!api || !api->current_work_stream) return Ref();
    Ref device = checked(PyObject_CallMethodNoArgs(obj, l->dlpack_device_name));
    int type = 0, id = 0;
    if (!PyArg_ParseTuple(device.get(), "ii", &type, &id)) throw PythonError{};
    if (!Device{static_cast<DeviceType>(type), id}.is_cuda_device_or_managed()) return Ref();
    void* stream = nullptr;
    if (api->current_work_stream(type, id, &stream) != 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "current_work_stream of the exchange API failed");
        throw PythonError{};
    }
    // The NULL handle is the legacy default stream, spelt 1, never 0 (the core's rule).
    return checked(PyLong_FromSsize_t(StreamValue::from_handle(stream).encoded()));
}

// Python argument -> View through the wheel's import_array: stridex.view(src, stream=stream)'s
// import described in C, its keep-alive handed over, so that the View built here releases the
// producer's memory directly. The wheel's View constructor validated the description (the slot's
// contract), so only what this stridex may know differently from the wheel's is checked again:
// the dtype, the device and the number of axes; a dtype or device type that `r` names is one this
// stridex knows, so a description that matches it needs no lookup.
inline View import_through_array(python::StridexImportArray import_array, PyObject* src, PyObject* stream,
                                 std::uint64_t flags, const Requirements& r) {
    std::int64_t dims[2 * kMaxNdim];  // the slot writes 2 * ndim of them
    python::StridexArray a;
    a.dims = dims;
    a.max_ndim = kMaxNdim;
    a.reserved = 0;
    if (import_array(src, stream, flags, &a) != 0) throw PythonError{};
    Owner owner;
    if (a.release) {
        try {
            owner = Owner::from_callback(a.release, a.context);
        } catch (...) {
            a.release(a.context);  // ours from the call on: released even when no Owner could be made
            throw;
        }
    }
    const dlpack::DLTensor& t = a.tensor;
    if (t.ndim < 0 || t.ndim > kMaxNdim) fail(ErrorKind::value, "the caster API described ", t.ndim, " axes");
    const Dtype named{static_cast<DtypeCode>(t.dtype.code), t.dtype.bits, t.dtype.lanes};
    const Dtype dtype = r.has_dtype && named == r.dtype ? named
                                                        : Dtype::from_raw(t.dtype.code, t.dtype.bits, t.dtype.lanes);
    const Device device = r.has_device && t.device.device_type == static_cast<std::int32_t>(r.device_type) &&
                                  t.device.device_id >= 0
                              ? Device{r.device_type, t.device.device_id}
                              : Device::from_raw(t.device.device_type, t.device.device_id);
    const auto ndim = static_cast<std::size_t>(t.ndim);
    // The flags as import_managed reads them off the tensor import_tensor would have made.
    View view = View::unchecked(t.data, Layout::unchecked({dims, ndim}, {dims + ndim, ndim}), dtype, device,
                                dlpack::writability_of_flags(a.flags), std::move(owner),
                                dlpack::subbyte_padded_of_flags(a.flags));
    view.set_stream(a.stream);
    return view;
}

// Python argument -> View through the wheel's caster API: import_array where the table has it,
// else stridex.view(src, stream=stream)'s import as one DLPack tensor (`stream` may be null: the
// default contract).
inline View import_through_api(const python::CasterApi& api, PyObject* src, PyObject* stream, std::uint64_t flags,
                               const Requirements& r) {
    if (python::StridexImportArray import_array = import_array_of(api))
        return import_through_array(import_array, src, stream, flags, r);
    dlpack::DLManagedTensorVersioned* t = nullptr;
    std::intptr_t ready = kNoStream;
    if (api.import_tensor(src, stream, flags, &t, &ready) != 0) throw PythonError{};
    View view = dlpack::import_managed(t);
    view.set_stream(ready);
    return view;
}

// The same through Python, for a wheel without a caster API of our major: stridex.view(src), then
// the new stridex.View's tensor through its exchange API (a stridex.View with nothing pending
// needs no new import).
inline View import_through_python(PyObject* src, bool is_view, PyObject* stream) {
    Link* l = link();
    Ref imported;
    std::intptr_t ready = is_view ? stream_of(src) : kNoStream;
    if (is_view && ready == kNoStream) {
        imported = Ref::borrow(src);  // nothing pending: nothing to order
    } else if (stream) {
        PyObject* args[] = {src, stream};
        Ref names = checked(PyTuple_Pack(1, l->stream_name));
        imported = checked(PyObject_Vectorcall(l->view_fn, args, 1, names.get()));
    } else {
        PyObject* args[] = {nullptr, src};  // a slot before args[0]: vectorcall may use it
        imported = checked(PyObject_Vectorcall(l->view_fn, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
    }
    if (imported.get() != src) ready = stream_of(imported.get());
    return from_stridex_view(imported.get(), ready);
}

// Python argument -> View meeting `r`. False (no Python error set) when `src` cannot be converted:
// the binding library then tries the next overload or raises its TypeError. Foreign arrays are
// taken only when `convert` is allowed (for stridex.View itself, no conversion is involved), and
// the one copy arg::may_copy allows happens only then too.
// An array that meets everything but the layout, whose copy is refused (device memory, until the
// CUDA copy engine is plugged in), is the caller's mistake rather than another overload's
// business: `refusal` receives why, and the caster raises it (BufferError) instead of calling.
inline bool import_arg(PyObject* src, bool convert, const Requirements& r, View& out,
                       std::string* refusal = nullptr) noexcept {
    try {
        Link* l = link();
        const bool is_view = is_stridex_view(src);
        if (!is_view && !convert) return false;
        // The caller's stream: asked by the wheel (minor 2), which checks the exchange API first;
        // asked here only from an older wheel or on the Python path.
        const bool wheel_asks = r.caller_stream && !is_view && l->caster_api && l->caster_api->minor >= 2;
        Ref stream = (r.caller_stream && !is_view && !wheel_asks) ? caller_stream_of(src) : Ref();
        const std::uint64_t flags = wheel_asks ? python::kImportCallerStream : 0;
        // Straight into `out` (the caster's own value): no View is moved on the common path.
        out = l->caster_api ? import_through_api(*l->caster_api, src, stream.get(), flags, r)
                            : import_through_python(src, is_view, stream.get());
        if (satisfies(r, out)) return true;
        const View view = std::exchange(out, View());  // not the argument, whatever comes next
        if (!(r.may_copy && convert)) return false;
        try {
            out = conform(r, view);  // the one explicit copy, or a refusal
        } catch (const Error& e) {
            // The copy engine refuses a memory it cannot copy (unsupported) or a device it cannot
            // allocate on (value, as every device argument it cannot serve); anything else is
            // not just the layout.
            if ((e.kind() != ErrorKind::unsupported && e.kind() != ErrorKind::value) || !refusal) return false;
            *refusal = e.what();
        }
        return true;
    } catch (...) {
        PyErr_Clear();
        return false;
    }
}

// A View (C++) -> a new stridex.View, with its device checked against the memory (founding bug report 5 in docs/protocols.md: a
// CUDA allocation tagged cpu must never reach a consumer that dereferences it on the host). A
// pending stream (View::stream) travels along.
inline Ref to_stridex_view(const View& view) {
    if (!view.layout().empty()) (void)cuda::resolve_device(view.ptr(), view.byte_span(), view.device());
    Link* l = link();
    dlpack::DLManagedTensorVersioned* t = dlpack::export_versioned(view);
    if (l->caster_api) {
        PyObject* py = nullptr;
        // Steals t in every outcome; the stream goes along in the same call.
        if (l->caster_api->view_from_tensor(t, view.stream(), &py) != 0) throw PythonError{};
        return Ref(py);
    }
    Ref out;
    if (l->api) {
        void* py = nullptr;
        // Steals t in every outcome.
        if (l->api->managed_tensor_to_py_object_no_sync(t, &py) != 0) throw PythonError{};
        out = Ref(static_cast<PyObject*>(py));
    } else {
        Ref capsule(PyCapsule_New(t, dlpack::kVersionedCapsule, [](PyObject* c) noexcept {
            // Renamed used_* when consumed: the consumer owns the deleter then.
            if (!PyCapsule_IsValid(c, dlpack::kVersionedCapsule)) return;
            auto* m = static_cast<dlpack::DLManagedTensorVersioned*>(
                PyCapsule_GetPointer(c, dlpack::kVersionedCapsule));
            m->deleter(m);
        }));
        if (!capsule) {
            t->deleter(t);
            throw PythonError{};
        }
        out = checked(PyObject_CallOneArg(l->view_fn, capsule.get()));
    }
    if (view.stream() != kNoStream) {
        Ref stream = checked(PyLong_FromSsize_t(view.stream()));
        out = checked(PyObject_CallMethodOneArg(out.get(), l->with_stream_name, stream.get()));
    }
    return out;
}

// The from_dlpack of the framework `like` belongs to (framework_of.hpp): that of the root package
// (torch, numpy, cupy, warp...) of the nearest class whose package has one, so that a torch.Tensor
// subclass in user code comes back as a torch tensor. The package is taken from sys.modules (a
// class of it exists, so it is imported); jax's arrays, which live in jaxlib, go to jax.dlpack.
inline Ref from_dlpack_of(PyObject* like) {
    PyObject* fn = python::framework_of(Py_TYPE(like), [](const char* module) -> PyObject* {
        const std::string root(module, std::strcspn(module, "."));
        Ref package;
        if (root == "jaxlib" || root == "jax")
            package = Ref(PyImport_ImportModule("jax.dlpack"));
        else if (Ref key{PyUnicode_FromString(root.c_str())})
            package = Ref(PyImport_GetModule(key.get()));
        PyObject* found = package ? PyObject_GetAttrString(package.get(), "from_dlpack") : nullptr;
        if (!found) PyErr_Clear();
        return found;  // a new reference, or nullptr
    });
    if (!fn)
        fail(ErrorKind::type, "cannot return an array like a ", excerpt(Py_TYPE(like)->tp_name),
             ": no package of its type or its bases has a from_dlpack");
    return Ref(fn);
}

// A returned View -> a stridex.View, or the framework of `like` (when given and not a stridex.View).
inline Ref export_view(const View& view, PyObject* like = nullptr) {
    Ref out = to_stridex_view(view);
    if (!like || is_stridex_view(like)) return out;
    Ref fn = from_dlpack_of(like);
    return checked(PyObject_CallOneArg(fn.get(), out.get()));
}

// Sets the Python error for the exception being handled (for noexcept caster entry points that
// have no binding-library exception in flight).
inline void set_python_error() noexcept {
    python::set_python_error_for_current_exception<PythonError>([](PythonError&) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "stridex caster: unknown Python error");
    });
}

}  // namespace interop
}  // namespace stridex
