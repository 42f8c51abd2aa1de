// stridex.view(obj, *, stream=...): the entry point and the protocol order. (The per-type cache
// is import_type_cache.cpp; the attribute lookups and their error rule are attributes.cpp.)
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
#include "import/import.hpp"
#include "import/importers.hpp"

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "common/arguments.hpp"
#include "common/attributes.hpp"
#include "common/limited_api.hpp"
#include "common/names.hpp"
#include "common/set_error.hpp"
#include "export/export.hpp"
#include "export/py_owner.hpp"
#include "import/import_type_cache.hpp"
#include "sanitizer/handover.hpp"
#include "sanitizer/sanitizer.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace stridex::python {

namespace {

// Where an import builds its View: inside a new stridex.View object (stridex.view()), or in C++
// storage the caller owns (the caster API: no Python object at all). Either way the View is built
// once, in place (from the importers' prvalues), and never moved.
class Result {
public:
    Result() : object_(nb::inst_alloc(nb::handle(reinterpret_cast<PyObject*>(view_type())))) {
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
    bool python() const noexcept { return slot_ != nullptr; }  // a stridex.View object, not the caster API
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

// The producer framework's current stream for obj's GPU, as a request (CuPy's for a cupy.ndarray
// read from its struct, else what the type's exchange API names).
StreamRequest current_stream_request(PyObject* obj, const TypeEntry& e) {
    if (e.array_struct == ArrayStruct::cupy) return cupy_caller_stream(obj);
    return caller_stream_request(obj, e);
}

// The record of an import's hand-over (handover.hpp), once the View is ordered for the caller.
// `owner`: the producer's object; `entry`: its type's (nullptr for a stridex.View imported again,
// whose stream is its producer's); `ready`: the stream the producer left the data on (kNoStream:
// none promised). The consumer's stream is the View's, none under NO_SYNC.
//
// The producer's stream where none was promised is the producer framework's current stream (its
// exchange API says), else the legacy default stream, where array API producers work; where the
// producer ordered its work onto the consumer's stream itself (__dlpack__(stream=S)), `ready` is
// that stream, not the producer's: its allocator's is its current one. Only the sanitizer reads
// the producer's stream, so it is asked (a call into the producer) only while the sanitizer is on,
// and only for GPU memory.
Handover import_handover(PyObject* owner, const TypeEntry* entry, const StreamRequest& request, std::intptr_t ready,
                         const View& v, bool python, HandoverFlags flags) {
    const bool no_sync = request.kind == StreamRequest::Kind::no_sync;
    flags = flags.with(HandoverFlag::imported).with(HandoverFlag::no_sync, no_sync);
    const bool unordered = no_sync || flags.has(HandoverFlag::ignores_stream);
    std::intptr_t producer = ready;
    if (entry && sanitizer::on() && v.device().is_cuda_family() &&
        ((ready == kNoStream && unordered) || ready == v.stream())) {
        const StreamRequest current = current_stream_request(owner, *entry);
        if (current.kind == StreamRequest::Kind::on_stream || ready == kNoStream) producer = current.consumer();
    }
    return {v,     owner,         producer, no_sync ? kNoStream : v.stream(), python ? "stridex.view" : "caster import",
            flags, request.object};
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
        if (e.row && e.row->records_streams) watch_streams(v, obj);  // its allocator hears of streams
        if (order && v.device().is_cuda_family())
            order_consumer_stream(v, request, ready);
        else
            v.set_stream(kNoStream);  // host memory: nothing is ever pending
        const bool ignores_stream = e.row && e.row->ignores_stream;
        const Handover handover = import_handover(obj, &e, request, ready, v, result.python(),
                                                  HandoverFlags{}.with(HandoverFlag::ignores_stream, ignores_stream));
        if (sanitizer::on()) sanitizer::observe(handover);
        handed_to_stream(handover);
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
    ViewConstraintArgs constraints;
    if (positional != 1) {
        PyErr_Format(PyExc_TypeError, "view() takes exactly 1 positional argument (%zd given)", positional);
        return nullptr;
    }
    if (kwnames) {
        // Interned keywords compare by identity; the equality test catches strings built at run time.
        const auto is = [](PyObject* key, PyObject* name) {
            return key == name || (PyUnicode_Compare(key, name) == 0 && !PyErr_Occurred());
        };
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
            PyObject* key = PyTuple_GET_ITEM(kwnames, i);
            PyObject* value = args[positional + i];
            if (is(key, names.stream)) {
                stream = value;
            } else if (is(key, names.dtype)) {
                constraints.dtype = value;
            } else if (is(key, names.ndim)) {
                constraints.ndim = value;
            } else if (is(key, names.shape)) {
                constraints.shape = value;
            } else if (is(key, names.device)) {
                constraints.device = value;
            } else if (is(key, names.writable)) {
                constraints.writable = value;
            } else if (is(key, names.contiguous)) {
                constraints.contiguous = value;
            } else {
                if (PyErr_Occurred()) return nullptr;
                PyErr_Format(PyExc_TypeError, "view() got an unexpected keyword argument '%U'", key);
                return nullptr;
            }
        }
    }
    try {
        if (!constraints.any()) return import_object(args[0], parse_stream(stream));
        // The constraints are read before the import (a bad argument imports nothing), and checked
        // by the C++ Arg<...> rules (conform), so a refusal reads as the casters' and XLA's do.
        const Requirements r = requirements_arg(constraints, "view()");
        nb::object out = nb::steal(import_object(args[0], parse_stream(stream)));
        if (!out.is_valid()) return nullptr;
        PyView& v = py_view(out.ptr());
        try {
            v.view = conform(r, v.view);
        } catch (const Error& e) {
            fail(e.kind(), "view(): ", e.what());
        }
        if (constraints.writable == Py_False) v.view = v.view.as_readonly();
        return out.release().ptr();
    } catch (...) {
        set_python_error_from_current_exception();
    }
    return nullptr;
}

const char kViewDoc[] =
    R"(view(obj, /, *, stream=None, dtype=None, ndim=None, shape=None, device=None, writable=None, contiguous=None)
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
stream it is ready on (View.stream). See docs/import.md.

dtype, ndim, shape, device, writable and contiguous are the checks a C++ function
taking stridex::Arg<...> makes, in the same words: the View is returned only if it
meets them, else TypeError "view(): expected stridex.View[dtype=float32, ndim=2],
found ...". shape takes None for any extent; device='cuda' is any GPU, 'cuda:1'
that one; writable=True refuses read-only memory, writable=False returns a
read-only View of it; contiguous='C' (or True) or 'F'. Nothing is ever copied.)";

PyMethodDef g_view_def = {"view", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&view_fastcall)),
                          METH_FASTCALL | METH_KEYWORDS, kViewDoc};

// The whole import into `result`.
PyObject* import_into(PyObject* obj, const StreamRequest& request, Result& result) {
    const Depth depth;
    PyTypeObject* type = Py_TYPE(obj);
    if (type == view_type()) {
        // Same memory, same owner: a copy of the View, ordered for the caller's stream.
        const PyView* in = &py_view(obj);
        new (result.storage()) View(in->view);
        result.built();
        order_consumer_stream(result.view(), request, in->view.stream());
        const Handover handover = import_handover(in->source.ptr(), nullptr, request, in->view.stream(), result.view(),
                                                  result.python(), {HandoverFlag::of_view});
        if (sanitizer::on()) sanitizer::observe(handover);
        handed_to_stream(handover);
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
    return current_stream_request(obj, e);
}

void bind_import(nb::module_& m) {
    if (!view_type()) fail(ErrorKind::value, "internal error: stridex.View must be bound before view()");

    bind_stream_policy(m);
    bind_consumed_capsule_error(m);
    nb::object view = nb::steal(PyCFunction_NewEx(&g_view_def, nullptr, m.attr("__name__").ptr()));
    if (!view.is_valid()) throw nb::python_error();
    m.attr("view") = view;

    // At exit, while the interpreter is whole: drop the cached types and the NO_SYNC reference so
    // that teardown (and nanobind's leak check) sees every object released.
    nb::module_::import_("atexit").attr("register")(nb::cpp_function([] {
        clear_type_cache();
        release_no_sync_sentinel();
    }));
}

}  // namespace stridex::python
