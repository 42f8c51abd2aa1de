// The extension's raw CPython entry points (vectorcall methods, slots, C callbacks) report a C++
// exception through this; the kind -> exception table is include/stridex/python/errors.hpp's.
#pragma once

#include <nanobind/nanobind.h>

#include "stridex/python/errors.hpp"

namespace stridex::python {

// Sets the Python error for the C++ exception being handled: stridex::Error by kind, a Python
// error restored as it was, bad_alloc as MemoryError, anything else RuntimeError. For every
// entry point nanobind does not wrap (vectorcall methods, slots, C callbacks).
inline void set_python_error_from_current_exception() noexcept {
    set_python_error_for_current_exception<nanobind::python_error>([](nanobind::python_error& e) { e.restore(); });
}

// Where stridex asks a producer something it can do without (an optional attribute, a description
// it can get another way) and the producer raised (the Python error set now): an Exception is the
// producer's failure, cleared so that the caller goes on without the answer; anything else
// (KeyboardInterrupt, SystemExit, GeneratorExit) is not the producer's to lose, and is raised.
// Without an error set it does nothing.
inline void clear_exception_or_throw() {
    if (!PyErr_Occurred()) return;
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw nanobind::python_error();
    PyErr_Clear();
}

}  // namespace stridex::python
