// stridex.view(obj, *, stream=...): the entry point, the per-type cache and the protocol order.
//
// Order of preference (first that the object offers and that accepts it):
//   0. a stridex.View (a cheap copy) or a raw DLPack capsule (consumed); numpy.ndarray read from
//      its struct, where that gives exactly what __dlpack__ would (import_numpy.cpp)
//   1. the DLPack C exchange API on the type (no Python call; ordering done here)
//   2. __dlpack__ (versioned capsule asked, either accepted, decided by name)
//   3. __cuda_array_interface__ (v2, v3)
//   4. __array_interface__ (v3)
//   5. the buffer protocol
// A BufferError from one protocol (a refusal of this particular array, e.g. NumPy refusing to
// export bfloat16 through DLPack) moves on to the next; any other error is the answer.
#include "arguments.hpp"
#include "import.hpp"

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "export.hpp"
#include "py_owner.hpp"
#include "stridex/error.hpp"
#include "set_error.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {

Names names{};


namespace {

PyTypeObject* g_view_type = nullptr;

// ---- The per-type cache ------------------------------------------------------------------------
// Direct-mapped, keyed by PyTypeObject*. An entry holds a strong reference to its type (so the
// address cannot be reused by another type while cached) and the type's tp_version_tag when it was
// probed: CPython resets the tag to 0 whenever the type or one of its bases is modified, and never
// reuses a tag, so a changed tag means "probe again". Types without a tag are never cached.
constexpr std::size_t kCacheSlots = 64;
TypeEntry g_cache[kCacheSlots];
CacheStats g_stats;

std::size_t slot_of(PyTypeObject* type) noexcept {
    const auto p = reinterpret_cast<std::uintptr_t>(type);
    return ((p >> 4) ^ (p >> 10)) & (kCacheSlots - 1);
}

unsigned int version_tag(PyTypeObject* type) noexcept {
#if PY_VERSION_HEX >= 0x030C0000
    if (type->tp_version_tag == 0) PyUnstable_Type_AssignVersionTag(type);
#endif
    return type->tp_version_tag;
}

// A class attribute found through the MRO (new reference), without running any code. None is
// absent: `__dlpack__ = None` in a subclass says "no DLPack here" (as `__hash__ = None` does), so
// the next protocol is tried.
PyObject* type_lookup(PyTypeObject* type, PyObject* name) noexcept {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject* found = _PyType_LookupRef(type, name);
#else
    PyObject* found = _PyType_Lookup(type, name);
    Py_XINCREF(found);
#endif
    if (found == Py_None) {
        Py_DECREF(found);
        return nullptr;
    }
    return found;
}

bool method_like(PyObject* descriptor) noexcept {
    // Functions, method descriptors and nanobind methods: callable with self as the first argument
    // (what CPython's own LOAD_METHOD relies on).
    return PyType_HasFeature(Py_TYPE(descriptor), Py_TPFLAGS_METHOD_DESCRIPTOR);
}

void release(TypeEntry& e) noexcept {
    Py_XDECREF(e.dlpack);
    Py_XDECREF(e.dlpack_device);
    Py_XDECREF(e.exchange_holder);
    Py_XDECREF(reinterpret_cast<PyObject*>(e.type));
    e = TypeEntry{};
}

// Imports in progress (a producer's __dlpack__ may call stridex.view again). While any is, entries
// leaving the cache are parked here instead of released: an import in progress uses a plain copy
// of its type's entry, whose references stay valid until the outermost import returns.
int g_depth = 0;
std::vector<TypeEntry>* g_parked = nullptr;

void retire(TypeEntry& old) noexcept {
    if (!old.type) return;
    if (g_depth > 0) {
        try {
            if (!g_parked) g_parked = new std::vector<TypeEntry>();
            g_parked->push_back(old);
            old = TypeEntry{};
            return;
        } catch (...) {
            // Out of memory: leak the references rather than free what an import may use.
            old = TypeEntry{};
            return;
        }
    }
    release(old);
}

struct Depth {
    Depth() noexcept { ++g_depth; }
    ~Depth() {
        if (--g_depth == 0 && g_parked && !g_parked->empty()) {
            std::vector<TypeEntry> parked;
            parked.swap(*g_parked);
            for (TypeEntry& e : parked) release(e);
        }
    }
    Depth(const Depth&) = delete;
    Depth& operator=(const Depth&) = delete;
};

TypeEntry probe(PyTypeObject* type) {
    TypeEntry e;
    e.exchange = exchange_api_of(type, &e.exchange_holder);  // first: it may throw
    Py_INCREF(reinterpret_cast<PyObject*>(type));
    e.type = type;
    e.dlpack = type_lookup(type, names.dlpack);
    e.dlpack_unbound = e.dlpack && method_like(e.dlpack);
    e.dlpack_device = type_lookup(type, names.dlpack_device);
    e.dlpack_device_unbound = e.dlpack_device && method_like(e.dlpack_device);
    PyObject* cai = type_lookup(type, names.cuda_array_interface);
    PyObject* ai = type_lookup(type, names.array_interface);
    e.cai_on_type = cai != nullptr;
    e.ai_on_type = ai != nullptr;
    Py_XDECREF(cai);
    Py_XDECREF(ai);
    // Instances with a __dict__ or a custom __getattr__ may carry the protocols themselves.
    e.instance_attrs = type->tp_dictoffset != 0 || type->tp_getattro != PyObject_GenericGetAttr;
    e.buffer = type->tp_as_buffer && type->tp_as_buffer->bf_getbuffer;
    e.row = &producer_for(type);
    e.keywords = e.row->keywords;
    e.array_struct = readable_array_struct(type, *e.row, e.dlpack);
    e.jaxlib_export = jaxlib_export_usable(type, *e.row, e.dlpack);
    if (e.row->exchange_skips_refusals && e.row->takes(Shortcut::torch_getter)) {
        // A C getset (torch's) is called without the generic attribute lookup on every import; the
        // type holds it, and a change to the type means a new probe. Anything else: getattr.
        if (PyObject* d = type_lookup(type, names.requires_grad)) {
            if (Py_TYPE(d) == &PyGetSetDescr_Type) {
                const PyGetSetDef* def = reinterpret_cast<PyGetSetDescrObject*>(d)->d_getset;
                e.requires_grad_get = def->get;
                e.requires_grad_closure = def->closure;
            }
            Py_DECREF(d);
        }
    }
    e.version_tag = version_tag(type);
    return e;
}

// The type's entry, as a plain copy (see g_parked). `fresh` receives a probed entry that could
// not be cached (no version tag): its references are the caller's to release.
TypeEntry entry_for(PyTypeObject* type, bool* uncached) {
    TypeEntry& slot = g_cache[slot_of(type)];
    *uncached = false;
    if (slot.type == type && slot.version_tag != 0 && slot.version_tag == type->tp_version_tag) {
        ++g_stats.hits;
        return slot;
    }
    TypeEntry e = probe(type);
    if (e.version_tag == 0) {
        ++g_stats.uncacheable;
        *uncached = true;
        return e;
    }
    ++g_stats.fills;
    TypeEntry old = slot;
    slot = e;
    retire(old);
    return e;
}

// The object a bound method (Python or C) is bound to, or nullptr (borrowed).
PyObject* bound_self(PyObject* callable) noexcept {
    if (PyMethod_Check(callable)) return PyMethod_GET_SELF(callable);
    if (PyCFunction_Check(callable)) {
        PyObject* self = PyCFunction_GET_SELF(callable);
        return self && !PyModule_Check(self) ? self : nullptr;  // a module function has its module
    }
    return nullptr;
}

// Releases an entry_for() entry that could not be cached: a probed entry that is nobody else's.
struct Uncached {
    TypeEntry& e;
    bool on;
    ~Uncached() {
        if (on) release(e);
    }
};

// Remembers what a TypeError retry learned (keywords the producer does not take).
void learn(const TypeEntry& e, DlpackKeywords keywords) noexcept {
    TypeEntry& slot = g_cache[slot_of(e.type)];
    if (slot.type == e.type && slot.version_tag == e.version_tag) slot.keywords = keywords;
}

// obj.name or nullptr when absent, without raising (and clearing) AttributeError where possible.
PyObject* optional_attr(PyObject* obj, PyObject* name) {
    PyObject* out = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyObject_GetOptionalAttr(obj, name, &out) < 0) throw nb::python_error();
#else
    if (_PyObject_LookupAttr(obj, name, &out) < 0) throw nb::python_error();
#endif
    return out;
}

// Where an import builds its View: inside a new stridex.View object (stridex.view()), or in C++
// storage the caller owns (the caster API: no Python object at all). Either way the View is built
// once, in place (from the importers' prvalues), and never moved.
class Result {
public:
    Result() : object_(nb::inst_alloc(nb::handle(reinterpret_cast<PyObject*>(g_view_type)))) {
        slot_ = nb::inst_ptr<PyView>(object_);
        view_ = &slot_->view;
    }
    explicit Result(View* storage) noexcept : view_(storage) {}  // raw memory for one View
    Result(const Result&) = delete;
    Result& operator=(const Result&) = delete;
    ~Result() {
        if (built_ && !done_) view_->~View();  // a failure after the View was built
    }
    View* storage() noexcept { return view_; }
    void built() noexcept { built_ = true; }
    View& view() noexcept { return *view_; }
    // Hands the built View over. To Python: sets its source object and the producer's description
    // of opaque elements (PyView::element, or empty), marks the instance ready and returns it. In
    // C++ storage: the caller owns the View from here (nullptr is returned; source and element
    // exist only on the Python side).
    PyObject* publish(PyObject* source, nb::object element = {}) {
        done_ = true;
        if (!slot_) return nullptr;
        new (&slot_->source) nb::object(nb::borrow(source));
        new (&slot_->element) nb::object(std::move(element));
        nb::inst_mark_ready(object_);
        return object_.release().ptr();
    }

private:
    nb::object object_;
    PyView* slot_ = nullptr;  // not yet a PyView: its members are constructed one by one
    View* view_;
    bool built_ = false, done_ = false;
};

// BufferErrors of the protocols tried, for one error that says what each said.
class Failures {
public:
    // Runs `build` (which placement-constructs the View in `result`); false after a BufferError.
    template <class F>
    bool attempt(const char* protocol, Result& result, F&& build) {
        try {
            build(result.storage());
            result.built();
            return true;
        } catch (nb::python_error& e) {
            if (!e.matches(PyExc_BufferError)) throw;
            add(protocol, std::current_exception(), nb::str(e.value()).c_str());
        } catch (const FinalRefusal&) {
            throw;
        } catch (const Error& e) {
            if (e.kind() != ErrorKind::buffer && e.kind() != ErrorKind::unsupported) throw;
            add(protocol, std::current_exception(), e.what());
        }
        return false;
    }
    [[noreturn]] void raise(PyObject* obj) const {
        if (count_ == 1) std::rethrow_exception(first_);
        fail(ErrorKind::buffer, "stridex.view() cannot import this ", type_name(obj), ": ", text_);
    }

private:
    void add(const char* protocol, std::exception_ptr e, const char* message) {
        if (count_++ == 0) first_ = std::move(e);
        if (!text_.empty()) text_ += "; ";
        text_ += protocol;
        text_ += ": ";
        text_ += message;
    }
    std::exception_ptr first_;
    std::string text_;
    int count_ = 0;
};

[[noreturn]] void fail_no_protocol(PyObject* obj) {
    // Why the type's exchange API, if it offers one, was declined: asked again here, on the error
    // path, rather than carried in every cache entry that an import copies.
    PyObject* holder = nullptr;
    const char* declined = nullptr;
    exchange_api_of(Py_TYPE(obj), &holder, &declined);
    Py_XDECREF(holder);
    constexpr char kRest[] = "no __dlpack__, no __cuda_array_interface__, no __array_interface__ and no buffer "
                             "protocol, and it is neither a DLPack capsule nor a stridex.View";
    if (declined)
        fail(ErrorKind::type, "stridex.view() cannot import an object of type ", type_name(obj),
             ": stridex declined its DLPack exchange API (", declined, "), and it has ", kRest);
    fail(ErrorKind::type, "stridex.view() cannot import an object of type ", type_name(obj),
         ": it has no DLPack exchange API (__dlpack_c_exchange_api__), ", kRest);
}

// The protocols in order, each building the View into `result` on success.
PyObject* import_protocols(PyObject* obj, const StreamRequest& request, Result& result) {
    bool uncached = false;
    TypeEntry e = entry_for(Py_TYPE(obj), &uncached);
    const Uncached uncached_guard{e, uncached};

    Failures failures;
    std::intptr_t ready = kNoStream;
    nb::object element;  // the producer's description of opaque elements (interfaces only)
    bool offered = false;
    auto done = [&](bool order) {
        View& v = result.view();
        if (order && v.device().is_cuda_family())
            order_consumer_stream(v, request, ready);
        else
            v.set_stream(kNoStream);  // host memory: nothing is ever pending
        // Only an opaque element has a description; one left by a protocol that failed is dropped.
        return result.publish(obj, v.dtype().is_opaque_bytes() ? std::move(element) : nb::object());
    };

    if (e.array_struct == ArrayStruct::numpy && import_numpy_struct(obj, result.storage())) {
        result.built();
        return done(/*order=*/false);  // host memory: no stream
    }
    if (e.array_struct == ArrayStruct::cupy && import_cupy_struct(obj, result.storage(), ready)) {
        result.built();
        return done(/*order=*/true);
    }
    if (e.exchange) {
        offered = true;
        if (failures.attempt("DLPack exchange API", result,
                             [&](View* at) { new (at) View(import_exchange(obj, e, ready)); }))
            return done(/*order=*/true);
    }

    // __dlpack__ on the instance rather than the type (proxies, test doubles): called bound.
    // (An optional, so that the common case, __dlpack__ on the type, builds no second entry.)
    nb::object instance_dlpack, instance_device;
    std::optional<TypeEntry> instance_entry;
    TypeEntry* d = &e;
    if (!e.dlpack && e.instance_attrs) {
        instance_dlpack = nb::steal(optional_attr(obj, names.dlpack));
        if (instance_dlpack.is_valid() && !instance_dlpack.is_none()) {
            instance_entry.emplace(e);
            instance_entry->dlpack = instance_dlpack.ptr();
            instance_entry->dlpack_unbound = false;
            // A proxy forwarding to another object's __dlpack__ (a bound method): the quirks are
            // that object's producer's (torch's spelt-out stream=None, JAX's read-only arrays).
            if (PyObject* self = bound_self(instance_dlpack.ptr()); self && Py_TYPE(self) != Py_TYPE(obj)) {
                instance_entry->row = &producer_for(Py_TYPE(self));
                instance_entry->keywords = instance_entry->row->keywords;
            }
            if (!e.dlpack_device) {
                instance_device = nb::steal(optional_attr(obj, names.dlpack_device));
                if (instance_device.is_none()) instance_device = nb::object();  // None: absent
                instance_entry->dlpack_device = instance_device.ptr();
                instance_entry->dlpack_device_unbound = false;
            }
            d = &*instance_entry;
        }
    }
    if (d->dlpack) {
        offered = true;
        const DlpackKeywords before = d->keywords;
        const bool ok = failures.attempt("__dlpack__", result, [&](View* at) {
            new (at) View(import_dlpack_method(obj, *d, request, ready));
        });
        if (d == &e && e.keywords != before && !uncached) learn(e, e.keywords);
        if (ok) return done(/*order=*/true);
    }

    if (e.cai_on_type || e.instance_attrs) {
        nb::object cai = nb::steal(optional_attr(obj, names.cuda_array_interface));
        if (cai.is_valid() && !cai.is_none()) {
            offered = true;
            if (failures.attempt("__cuda_array_interface__", result,
                                 [&](View* at) { new (at) View(import_cai(obj, cai.ptr(), ready, &element)); }))
                return done(/*order=*/true);
        }
    }
    if (e.ai_on_type || e.instance_attrs) {
        nb::object ai = nb::steal(optional_attr(obj, names.array_interface));
        if (ai.is_valid() && !ai.is_none()) {
            offered = true;
            if (failures.attempt("__array_interface__", result,
                                 [&](View* at) { new (at) View(import_array_interface(obj, ai.ptr(), &element)); }))
                return done(/*order=*/false);  // host memory: no stream
        }
    }
    if (e.buffer) {
        offered = true;
        if (failures.attempt("buffer protocol", result, [&](View* at) { new (at) View(import_buffer(obj, &element)); }))
            return done(/*order=*/false);
    }
    if (!offered) fail_no_protocol(obj);
    failures.raise(obj);
}

// stridex.view as a plain METH_FASTCALL | METH_KEYWORDS function: the hot path pays no general
// argument-matching machinery (about 15 ns less than a bound nanobind function).
PyObject* view_fastcall(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) noexcept {
    const Py_ssize_t positional = PyVectorcall_NARGS(nargs);
    PyObject* stream = Py_None;
    if (positional != 1) {
        PyErr_Format(PyExc_TypeError, "view() takes exactly 1 positional argument (%zd given)", positional);
        return nullptr;
    }
    if (kwnames) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
            PyObject* key = PyTuple_GET_ITEM(kwnames, i);
            if (key != names.stream && PyUnicode_Compare(key, names.stream) != 0) {
                if (PyErr_Occurred()) return nullptr;
                PyErr_Format(PyExc_TypeError, "view() got an unexpected keyword argument '%U'", key);
                return nullptr;
            }
            stream = args[positional + i];
        }
    }
    try {
        return import_object(args[0], parse_stream(stream));
    } catch (...) {
        set_python_error_from_current_exception();
    }
    return nullptr;
}

const char kViewDoc[] = R"(view(obj, /, *, stream=None)
--

A zero-copy stridex.View of any array: DLPack (C exchange API, __dlpack__ or a capsule),
__cuda_array_interface__, __array_interface__ or the buffer protocol, tried in that order.

stream says on which CUDA stream you will use the data::

  None (default)   array API semantics: the legacy default stream for CUDA producers
  an int           1 legacy default stream, 2 per-thread default stream, else a CUstream
                   handle; 0 is rejected (ambiguous); -1 means NO_SYNC
  a stream object  anything with __cuda_stream__, or a torch / CuPy / Numba stream
  stridex.NO_SYNC  no ordering at all: you synchronize yourself

The producer's pending work is ordered before your stream with an event (never a host
block); host producers such as NumPy are always sent stream=None. The View records the
stream it is ready on (View.stream). See docs/import.md.)";

PyMethodDef g_view_def = {"view", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&view_fastcall)),
                          METH_FASTCALL | METH_KEYWORDS, kViewDoc};

void intern(PyObject*& slot, const char* text) {
    slot = PyUnicode_InternFromString(text);
    if (!slot) throw nb::python_error();
}

// The whole import into `result`.
PyObject* import_into(PyObject* obj, const StreamRequest& request, Result& result) {
    const Depth depth;
    PyTypeObject* type = Py_TYPE(obj);
    if (type == g_view_type) {
        // Same memory, same owner: a copy of the View, ordered for the caller's stream.
        const PyView* in = &py_view(obj);
        new (result.storage()) View(in->view);
        result.built();
        order_consumer_stream(result.view(), request, in->view.stream());
        return result.publish(in->source.ptr() ? in->source.ptr() : Py_None, in->element);
    }
    if (type == &PyCapsule_Type) {
        // A raw capsule carries no stream: whatever ordering it needed happened when it was made.
        new (result.storage()) View(consume_capsule(obj, /*raw=*/true));
        result.built();
        result.view().set_stream(kNoStream);
        return result.publish(obj);
    }
    return import_protocols(obj, request, result);
}

}  // namespace

ArrayStruct readable_array_struct(PyTypeObject* type, const ProducerRow& row, PyObject* dlpack) noexcept {
    if (!dlpack) return ArrayStruct::none;  // only what __dlpack__ would describe is read
    if (numpy_struct_readable(type, row)) return ArrayStruct::numpy;
    if (cupy_struct_readable(type, row, dlpack)) return ArrayStruct::cupy;
    return ArrayStruct::none;
}

PyObject* import_object(PyObject* obj, const StreamRequest& request) {
    Result result;
    return import_into(obj, request, result);
}

void import_view_into(PyObject* obj, const StreamRequest& request, View* storage) {
    Result result(storage);
    import_into(obj, request, result);
}

StreamRequest caller_stream_request(PyObject* obj) {
    const Depth depth;  // __dlpack_device__ may import again: entries it evicts stay alive
    bool uncached = false;
    TypeEntry e = entry_for(Py_TYPE(obj), &uncached);
    const Uncached guard{e, uncached};
    if (e.array_struct == ArrayStruct::cupy) return cupy_caller_stream(obj);
    return caller_stream_request(obj, e);
}

PyObject* attr_or_null(PyObject* obj, const char* name) noexcept {
    PyObject* out = obj ? PyObject_GetAttrString(obj, name) : nullptr;
    if (!out) PyErr_Clear();
    return out;
}

PyObject* loaded_attr(const char* module, const char* name) noexcept {
    PyObject* modules = PyImport_GetModuleDict();
    return attr_or_null(modules ? PyDict_GetItemString(modules, module) : nullptr, name);  // borrowed module
}

PyTypeObject* loaded_type(const char* module, const char* name) noexcept {
    PyObject* t = loaded_attr(module, name);
    if (t && PyType_Check(t)) return reinterpret_cast<PyTypeObject*>(t);
    Py_XDECREF(t);
    return nullptr;
}

ShortcutSet shortcuts_of(PyTypeObject* type) {
    const Depth depth;  // the probe's release may drop what an import in progress uses
    TypeEntry e = probe(type);
    ShortcutSet s;
    if (e.array_struct == ArrayStruct::numpy) s.add(Shortcut::numpy_struct);
    if (e.array_struct == ArrayStruct::cupy) s.add(cupy_struct_shortcut());
    if (e.jaxlib_export) s.add(Shortcut::jaxlib_export);
    if (e.requires_grad_get) s.add(Shortcut::torch_getter);
    if (borrows_exchange_tensors(e)) s.add(Shortcut::torch_borrowed);
    retire(e);
    return s;
}

CacheStats cache_stats() noexcept { return g_stats; }

void clear_type_cache() noexcept {
    for (TypeEntry& s : g_cache) {
        TypeEntry old = s;
        s = TypeEntry{};
        retire(old);
    }
}

void bind_import(nb::module_& m) {
    intern(names.dlpack, "__dlpack__");
    intern(names.dlpack_device, "__dlpack_device__");
    intern(names.exchange_api, "__dlpack_c_exchange_api__");
    intern(names.exchange_api_int, "__c_dlpack_exchange_api__");
    intern(names.cuda_array_interface, "__cuda_array_interface__");
    intern(names.array_interface, "__array_interface__");
    intern(names.dtype, "dtype");
    intern(names.name, "name");
    intern(names.requires_grad, "requires_grad");
    intern(names.is_conj, "is_conj");
    intern(names.version, "version");
    intern(names.shape, "shape");
    intern(names.typestr, "typestr");
    intern(names.data, "data");
    intern(names.strides, "strides");
    intern(names.mask, "mask");
    intern(names.stream, "stream");
    intern(names.offset, "offset");
    intern(names.descr, "descr");
    PyObject* s = nullptr;
    PyObject* mv = nullptr;
    intern(s, "stream");
    intern(mv, "max_version");
    names.kw_stream_max_version = PyTuple_Pack(2, s, mv);
    names.kw_max_version = PyTuple_Pack(1, mv);
    names.kw_stream = PyTuple_Pack(1, s);
    names.max_version = Py_BuildValue("(II)", dlpack::kMajorVersion, dlpack::kMinorVersion);
    Py_DECREF(s);
    Py_DECREF(mv);
    if (!names.kw_stream_max_version || !names.kw_max_version || !names.kw_stream || !names.max_version)
        throw nb::python_error();

    g_view_type = reinterpret_cast<PyTypeObject*>(nb::type<PyView>().ptr());
    if (!g_view_type) fail(ErrorKind::value, "internal error: stridex.View must be bound before view()");

    bind_stream_policy(m);
    bind_consumed_capsule_error(m);
    nb::object view = nb::steal(PyCFunction_NewEx(&g_view_def, nullptr, m.attr("__name__").ptr()));
    if (!view.is_valid()) throw nb::python_error();
    m.attr("view") = view;
    bind_internals(m);

    // At exit, while the interpreter is whole: drop the cached types and the NO_SYNC reference so
    // that teardown (and nanobind's leak check) sees every object released.
    nb::module_::import_("atexit").attr("register")(nb::cpp_function([] {
        clear_type_cache();
        release_no_sync_sentinel();
    }));
}

}  // namespace stridex::python
