// Owners and Views that involve Python objects.
#pragma once

#include <nanobind/nanobind.h>

#include "limited_api.hpp"
#include "sanitizer.hpp"
#include "stridex/owner.hpp"
#include "stridex/view.hpp"

namespace stridex::python {

// An Owner holding a strong reference to `object`. Its release may run on any thread, without the
// GIL (DLPack deleters do): it takes the GIL to drop the reference, and leaks it instead when the
// interpreter is finalizing, where taking the GIL would hang or crash.
Owner owner_of(nanobind::handle object);

// The Python face of a stridex::View: the View plus the Python object it came from (its `owner`
// attribute; the View's own Owner already keeps the memory alive), and, for opaque elements
// (Dtype::opaque_bytes: NumPy's void and structured dtypes), the producer's own description of
// them, which the interfaces re-export: a dict with 'typestr' and 'descr' (from an array
// interface) or 'format' (from the buffer protocol). None (or empty) otherwise.
struct PyView {
    View view;
    nanobind::object source;
    nanobind::object element;
    ~PyView() {
        if (sanitizer::on()) sanitizer::released(view, source);
    }
};

// Wraps a C++ View as a stridex.View. `source` is what `.owner` reports (None if empty);
// `element` is the producer's description of opaque elements, carried over to derived views.
nanobind::object wrap_view(View view, nanobind::object source, nanobind::object element = {});

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

// True once the interpreter is shutting down (or gone): taking the GIL then would hang or crash,
// so releases leak instead. Inline: the test-only module uses it too.
inline bool interpreter_finalizing() noexcept { return !Py_IsInitialized() || interpreter_is_finalizing(); }

// An Owner that releases a filled heap Py_buffer (with the GIL) and deletes it; if making the
// Owner fails, the buffer is released at once. *out receives the buffer on success.
Owner adopt_buffer(Py_buffer* buffer, Py_buffer** out);

// The Python object an Owner made by owner_of or adopt_buffer references (borrowed), or nullptr
// for any other owner. For the View type's garbage-collector support.
PyObject* python_object_of(const Owner& owner) noexcept;

}  // namespace stridex::python
