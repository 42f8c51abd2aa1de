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

}  // namespace stridex::python
