// The shims over CPython's versions, each written once: what differs between the Python versions
// stridex supports is decided here, and code elsewhere calls these. (Saving and restoring the error
// indicator is nanobind's `error_scope`; chaining a new exception to the one being raised is
// nanobind's `raise_from`.)
#pragma once

#include <nanobind/nanobind.h>

#include "common/limited_api.hpp"

namespace stridex::python {

// True once the interpreter is shutting down (or gone): taking the GIL then would hang or crash,
// so releases leak instead. Inline: the test-only module uses it too.
inline bool interpreter_finalizing() noexcept { return !Py_IsInitialized() || interpreter_is_finalizing(); }

// Runs f with the GIL held, taking it only when this thread does not hold it already: a View is
// most often dropped by Python code, and PyGILState_Ensure/Release cost two thread-local lookups
// each. From Python 3.12 the current thread state is per thread and NULL while this thread has
// released the GIL, so it answers cheaply; before 3.12 it is one global (the GIL holder's, whoever
// that is), which says nothing about this thread, so the GIL is always taken there.
template <class F>
inline void with_gil(F&& f) noexcept {
    bool known = false;
    if (thread_state_unchecked(&known) != nullptr && known) return f();
    PyGILState_STATE gil = PyGILState_Ensure();
    f();
    PyGILState_Release(gil);
}

// The object the weak reference `ref` points at (a strong reference), or an empty object where it
// died. Where the interpreter cannot say (an error, cleared here), `*failed` is set, where given,
// and the object is empty.
inline nanobind::object weak_referent(PyObject* ref, bool* failed = nullptr) noexcept {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject* o = nullptr;
    if (PyWeakref_GetRef(ref, &o) < 0) {
        PyErr_Clear();
        if (failed) *failed = true;
        return {};
    }
    return nanobind::steal(o);
#else
    (void)failed;  // the borrowed form cannot fail on a weak reference
    PyObject* o = PyWeakref_GetObject(ref);
    return o == Py_None ? nanobind::object() : nanobind::borrow(o);
#endif
}

}  // namespace stridex::python
