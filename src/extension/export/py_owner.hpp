// The Python face of a View (PyView, wrap_view); the owners of Python objects are common/python_owner.hpp.
#pragma once

#include <nanobind/nanobind.h>

#include "common/python_owner.hpp"
#include "sanitizer/sanitizer.hpp"
#include "stridex/owner.hpp"
#include "stridex/view.hpp"

namespace stridex::python {

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

}  // namespace stridex::python
