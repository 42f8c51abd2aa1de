// The caster API (include/stridex/python/caster_api.hpp): the C table the nanobind and pybind11
// casters of extensions call, as stridex._stridex._caster_api.
//
// import_tensor is stridex.view() without the Python object: the same import (import.cpp, into C++
// storage), then one DLPack tensor for the extension. Compared with stridex.view(obj) followed by
// the exchange API's export, it saves the stridex.View object, the `stream` attribute read and the
// exchange API's extra ordering on the legacy stream (the caster states the stream it gets).
// import_array (minor 1) is the same import written into the caster's C struct, with no tensor made
// and the View's owner handed over as a callback: what the casters call where the table has it.
#include "stridex/python/caster_api.hpp"

#include "common/bindings.hpp"
#include "export/export.hpp"
#include "import/import.hpp"
#include "stream/stream_policy.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

using dlpack::DLManagedTensorVersioned;

// What both import slots share: stridex.view()'s import of `obj`, handed to `use` as a View that
// is destroyed afterwards (so `use` may take its owner). 0, or -1 with the Python error set.
template <class Use>
int import_then(PyObject* obj, PyObject* stream, std::uint64_t flags, Use&& use) noexcept {
    if ((flags & ~kImportCallerStream) != 0) {
        PyErr_Format(PyExc_ValueError,
                     "stridex caster API: unknown flags %llu (this stridex defines 1, the caller's stream)",
                     static_cast<unsigned long long>(flags));
        return -1;
    }
    const bool caller_stream = (flags & kImportCallerStream) != 0;
    if (caller_stream && stream != nullptr && stream != Py_None) {
        PyErr_SetString(PyExc_ValueError,
                        "stridex caster API: the caller's stream flag takes no stream (NULL or None)");
        return -1;
    }
    try {
        const StreamRequest request = caller_stream ? caller_stream_request(obj)
                                      : stream      ? parse_stream(stream)
                                                    : StreamRequest{};
        union Slot {  // raw storage: import_view_into constructs the View there only on success
            View view;
            Slot() noexcept {}
            ~Slot() {}
        } slot;
        import_view_into(obj, request, &slot.view);
        struct Destroy {
            View& v;
            ~Destroy() { v.~View(); }
        } destroy{slot.view};
        require_dlpack_dtype(slot.view);
        use(slot.view);
        return 0;
    } catch (...) {
        set_python_error_from_current_exception();
        return -1;
    }
}

int import_tensor(PyObject* obj, PyObject* stream, std::uint64_t flags, DLManagedTensorVersioned** out,
                  std::intptr_t* ready) noexcept {
    if (obj == nullptr || out == nullptr || ready == nullptr) {
        PyErr_SetString(PyExc_ValueError, "stridex caster API: NULL argument");
        return -1;
    }
    *out = nullptr;
    return import_then(obj, stream, flags, [&](View& view) {
        *out = dlpack::export_versioned(view);
        *ready = cuda::ready_stream(view).encoded();  // a stream value only: a Pending resolves onto it
    });
}

// The View's fields written out, and its owner handed over as a callback rather than wrapped in an
// exported tensor: the caster's View then releases the producer's memory directly (one owner level
// where import_tensor has three: the caster's, the export's and the import's).
int import_array(PyObject* obj, PyObject* stream, std::uint64_t flags, StridexArray* out) noexcept {
    if (obj == nullptr || out == nullptr) {
        PyErr_SetString(PyExc_ValueError, "stridex caster API: NULL argument");
        return -1;
    }
    out->release = nullptr;
    out->context = nullptr;
    if (out->max_ndim < 0) {
        PyErr_Format(PyExc_ValueError, "stridex caster API: max_ndim must be >= 0, found %d",
                     static_cast<int>(out->max_ndim));
        return -1;
    }
    if (out->max_ndim > 0 && out->dims == nullptr) {
        PyErr_Format(PyExc_ValueError, "stridex caster API: NULL dims for max_ndim %d",
                     static_cast<int>(out->max_ndim));
        return -1;
    }
    Owner keep;
    const int rc = import_then(obj, stream, flags, [&](View& view) {
        const int ndim = view.ndim();
        if (ndim > out->max_ndim)
            fail(ErrorKind::buffer, "the caller takes arrays of at most ", out->max_ndim, " axes, found ", ndim);
        dlpack::describe(view, out->tensor, out->dims);
        // The flags and stream an exported tensor and import_tensor's *ready would carry.
        out->flags = dlpack::flags_of(view);
        out->stream = cuda::ready_stream(view).encoded();
        keep = std::move(view).take_owner();  // last: the View is destroyed next
    });
    if (rc != 0) return rc;  // `keep` releases what it holds
    // `keep` is the owner's only reference unless another View shares it (a stridex.View
    // argument's): into_callback then hands over the producer's own release callback.
    const Owner::Callback callback = keep.into_callback();
    out->release = callback.release;
    out->context = callback.context;
    return 0;
}

int view_from_tensor(DLManagedTensorVersioned* tensor, std::intptr_t stream, PyObject** out) noexcept {
    try {
        View view = dlpack::import_managed(tensor);  // owns the tensor from here, in every outcome
        if (out == nullptr) fail(ErrorKind::value, "stridex caster API: NULL output pointer");
        *out = nullptr;
        view.set_stream(checked_stream_int(stream, "stream", /*allow_no_sync=*/true));
        *out = wrap_view(std::move(view), nb::none()).release().ptr();
        return 0;
    } catch (...) {
        set_python_error_from_current_exception();
        return -1;
    }
}

const CasterApi kCasterApi{kCasterApiMajor, kCasterApiMinor,   sizeof(CasterApi),
                           &import_tensor,  &view_from_tensor, &import_array};

}  // namespace

void bind_caster_api(nb::module_& m) {
    // No destructor: the table is static and outlives every extension that holds it.
    nb::object capsule = nb::steal(PyCapsule_New(const_cast<CasterApi*>(&kCasterApi), kCasterApiCapsule, nullptr));
    if (!capsule.is_valid()) throw nb::python_error();
    m.attr("_caster_api") = capsule;
}

}  // namespace stridex::python
