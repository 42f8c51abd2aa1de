// A nanobind type caster for stridex::View, for extension authors:
//
//     #include <stridex/python/nanobind.hpp>
//     stridex::View make(std::size_t n);           // returns a stridex.View to Python
//     double total(const stridex::View& values);  // takes anything stridex.view() takes
//
// The extension and the stridex wheel are separate modules, possibly built by different compilers
// with different stridex versions, so nothing C++ crosses between them: values travel as DLPack
// tensors through stridex.View's C exchange API (a versioned C struct, PROTOCOLS §1), with a
// versioned capsule and stridex.view() as the fallback when the API does not match.
//
// C++ -> Python: the View's device is checked against the memory first (cuda::resolve_device):
// a CUDA allocation tagged cpu, or tagged with the wrong ordinal, raises ValueError instead of
// reaching a consumer that would dereference a device pointer on the host (seeds/004). Build the
// View with cuda::view_of_pointer and the device is right by construction. A pending stream
// (View::stream) travels along.
//
// Python -> C++: a stridex.View, or (when implicit conversion is allowed) anything stridex.view()
// accepts. Data with no pending work arrives as is; data with pending work is ordered before the
// legacy default stream (`__dlpack__(stream=None)`, an event, no host block) and the C++ View
// says so (stream() == 1): launch on the legacy stream, or order your stream after it.
//
// Link the extension with stridex::stridex (the caster uses dlpack import/export and the driver).
#pragma once

#include <nanobind/nanobind.h>

#include "stridex/cuda/from_pointer.hpp"
#include "stridex/dlpack.hpp"
#include "stridex/python/errors.hpp"
#include "stridex/view.hpp"

namespace stridex::nanobind_interop {

namespace nb = ::nanobind;

// What the caster needs of the stridex Python module, looked up once (under the GIL). A plain
// pointer rather than a function-local static object: the lookup imports a module, which may
// release the GIL, and a C++ static guard held across that can deadlock with another thread.
struct Link {
    PyObject* view_type = nullptr;  // stridex.View
    PyObject* view_fn = nullptr;    // stridex.view, or nullptr in a stridex without it
    const dlpack::DLPackExchangeAPI* api = nullptr;  // nullptr when the API's major is not ours
};

inline Link* link() {
    static Link* cached = nullptr;  // constant-initialised: no guard
    if (cached) return cached;
    nb::module_ module = nb::module_::import_("stridex");
    auto* l = new Link();
    l->view_type = nb::object(module.attr("View")).release().ptr();  // kept for the life of the process
    if (nb::hasattr(module, "view")) l->view_fn = nb::object(module.attr("view")).release().ptr();
    nb::handle type(l->view_type);
    if (nb::hasattr(type, "__dlpack_c_exchange_api__")) {
        nb::object capsule = type.attr("__dlpack_c_exchange_api__");
        auto* api = static_cast<const dlpack::DLPackExchangeAPI*>(
            PyCapsule_GetPointer(capsule.ptr(), "dlpack_exchange_api"));
        if (api == nullptr) PyErr_Clear();
        // Walk prev_api to the newest API of our major version.
        while (api && api->header.version.major > dlpack::kMajorVersion)
            api = reinterpret_cast<const dlpack::DLPackExchangeAPI*>(api->header.prev_api);
        if (api && api->header.version.major == dlpack::kMajorVersion) l->api = api;
    }
    cached = l;
    return l;
}

// A versioned capsule's tensor, taken over (renamed used_*, as the protocol wants).
inline View import_capsule(nb::handle capsule) {
    auto* t = static_cast<dlpack::DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"));
    if (t == nullptr) throw nb::python_error();
    if (PyCapsule_SetName(capsule.ptr(), "used_dltensor_versioned") != 0) throw nb::python_error();
    return dlpack::import_managed(t);
}

// A stridex.View (Python) -> a View (C++).
inline View from_stridex_view(nb::handle obj) {
    Link* l = link();
    nb::object stream = obj.attr("stream");
    if (stream.is_none() && l->api) {
        // Nothing pending: the exchange API, no Python call and no capsule.
        dlpack::DLManagedTensorVersioned* t = nullptr;
        if (l->api->managed_tensor_from_py_object_no_sync(obj.ptr(), &t) != 0) throw nb::python_error();
        return dlpack::import_managed(t);
    }
    // Pending work: __dlpack__(stream=None) orders the legacy default stream after it.
    nb::object capsule = obj.attr("__dlpack__")(nb::arg("max_version") = nb::make_tuple(1, 3));
    View view = import_capsule(capsule);
    if (!stream.is_none() && view.device().is_cuda_family()) view.set_stream(1);
    return view;
}

// A View (C++) -> a stridex.View (Python), with its device checked against the memory.
inline nb::object to_stridex_view(const View& view) {
    if (!view.layout().empty()) (void)cuda::resolve_device(view.ptr(), view.byte_span(), view.device());
    Link* l = link();
    nb::object out;
    if (l->api) {
        dlpack::DLManagedTensorVersioned* t = dlpack::export_versioned(view);
        void* py = nullptr;
        // Steals t in every outcome.
        if (l->api->managed_tensor_to_py_object_no_sync(t, &py) != 0) throw nb::python_error();
        out = nb::steal(static_cast<PyObject*>(py));
    } else {
        if (l->view_fn == nullptr)
            fail(ErrorKind::type, "this stridex module offers neither the DLPack exchange API 1.x nor stridex.view");
        dlpack::DLManagedTensorVersioned* t = dlpack::export_versioned(view);
        nb::object capsule = nb::steal(PyCapsule_New(t, "dltensor_versioned", [](PyObject* c) noexcept {
            // Renamed used_* when consumed: the consumer owns the deleter then.
            if (!PyCapsule_IsValid(c, "dltensor_versioned")) return;
            auto* m = static_cast<dlpack::DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
            m->deleter(m);
        }));
        if (!capsule.is_valid()) {
            t->deleter(t);
            throw nb::python_error();
        }
        out = nb::handle(l->view_fn)(capsule);
    }
    if (view.stream() != kNoStream) out = out.attr("_with_stream")(static_cast<std::int64_t>(view.stream()));
    return out;
}


}  // namespace stridex::nanobind_interop

NAMESPACE_BEGIN(NB_NAMESPACE)
NAMESPACE_BEGIN(detail)

template <>
struct type_caster<stridex::View> {
    NB_TYPE_CASTER(stridex::View, const_name("stridex.View"))

    bool from_python(handle src, uint8_t flags, cleanup_list*) noexcept {
        namespace interop = stridex::nanobind_interop;
        try {
            interop::Link* l = interop::link();
            object obj = borrow(src);
            if (!PyObject_TypeCheck(src.ptr(), reinterpret_cast<PyTypeObject*>(l->view_type))) {
                // Other arrays only in nanobind's second (converting) pass, through stridex.view.
                if (!(flags & static_cast<uint8_t>(cast_flags::convert)) || l->view_fn == nullptr) return false;
                obj = handle(l->view_fn)(src);
            }
            value = interop::from_stridex_view(obj);
            return true;
        } catch (...) {
            // Not convertible: nanobind tries other overloads, then raises its own TypeError.
            PyErr_Clear();
            return false;
        }
    }

    static handle from_cpp(const stridex::View& view, rv_policy, cleanup_list*) noexcept {
        try {
            return stridex::nanobind_interop::to_stridex_view(view).release();
        } catch (...) {
            stridex::python::set_python_error_from_current_exception();
            return handle();
        }
    }
};

NAMESPACE_END(detail)
NAMESPACE_END(NB_NAMESPACE)
