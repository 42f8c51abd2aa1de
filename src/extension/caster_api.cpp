// The caster API (include/stridex/python/caster_api.hpp): the C table the nanobind and pybind11
// casters of extensions call, as stridex._stridex._caster_api.
//
// import_tensor is stridex.view() without the Python object: the same import (import.cpp, into C++
// storage), then one DLPack tensor for the extension. Compared with stridex.view(obj) followed by
// the exchange API's export, it saves the stridex.View object, the `stream` attribute read and the
// exchange API's extra ordering on the legacy stream (the caster states the stream it gets).
#include "stridex/python/caster_api.hpp"

#include "bindings.hpp"
#include "export.hpp"
#include "import.hpp"
#include "stream_policy.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

using dlpack::DLManagedTensorVersioned;

int import_tensor(PyObject* obj, PyObject* stream, std::uint64_t flags, DLManagedTensorVersioned** out,
                  std::intptr_t* ready) noexcept {
    if (obj == nullptr || out == nullptr || ready == nullptr) {
        PyErr_SetString(PyExc_ValueError, "stridex caster API: NULL argument");
        return -1;
    }
    *out = nullptr;
    if (flags != 0) {
        PyErr_Format(PyExc_ValueError, "stridex caster API: unknown flags %llu (this stridex defines none)",
                     static_cast<unsigned long long>(flags));
        return -1;
    }
    try {
        const StreamRequest request = stream ? parse_stream(stream) : StreamRequest{};
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
        *out = dlpack::export_versioned(slot.view);
        *ready = slot.view.stream();
        return 0;
    } catch (...) {
        set_python_error_from_current_exception();
        return -1;
    }
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

const CasterApi kCasterApi{kCasterApiMajor, kCasterApiMinor, sizeof(CasterApi), &import_tensor, &view_from_tensor};

}  // namespace

void bind_caster_api(nb::module_& m) {
    // No destructor: the table is static and outlives every extension that holds it.
    nb::object capsule = nb::steal(PyCapsule_New(const_cast<CasterApi*>(&kCasterApi), kCasterApiCapsule, nullptr));
    if (!capsule.is_valid()) throw nb::python_error();
    m.attr("_caster_api") = capsule;
}

}  // namespace stridex::python
