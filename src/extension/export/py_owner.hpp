// Owners and Views that involve Python objects.
#pragma once

#include <nanobind/nanobind.h>

#include "common/python_compat.hpp"
#include "sanitizer/sanitizer.hpp"
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

// An Owner that releases a filled heap Py_buffer (with the GIL) and deletes it; if making the
// Owner fails, the buffer is released at once. *out receives the buffer on success.
Owner adopt_buffer(Py_buffer* buffer, Py_buffer** out);

// The Python object an Owner made by owner_of or adopt_buffer references (borrowed), or nullptr
// for any other owner. For the View type's garbage-collector support.
PyObject* python_object_of(const Owner& owner) noexcept;

}  // namespace stridex::python
