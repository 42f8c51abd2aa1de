// stridex::Error -> Python exceptions: the one translation, shared by the _stridex extension
// (nanobind's translator, its raw CPython entry points, the exchange API's SetError) and by the
// header-only casters of extension authors.
#pragma once

#include <nanobind/nanobind.h>

#include <new>

#include "stridex/error.hpp"

namespace stridex::python {

// The Python exception class for each error kind (see ErrorKind).
inline PyObject* python_exception_for(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::buffer:
        case ErrorKind::unsupported: return PyExc_BufferError;
        case ErrorKind::type: return PyExc_TypeError;
        case ErrorKind::value: return PyExc_ValueError;
        case ErrorKind::index: return PyExc_IndexError;
        case ErrorKind::cuda: return PyExc_RuntimeError;
    }
    return PyExc_RuntimeError;
}

// Its name, for C interfaces that report errors as text (the exchange API's SetError).
inline const char* python_exception_name(ErrorKind kind) noexcept {
    return reinterpret_cast<PyTypeObject*>(python_exception_for(kind))->tp_name;
}

// Sets the Python error for the C++ exception being handled: stridex::Error by kind, a Python
// error restored as it was, bad_alloc as MemoryError, anything else RuntimeError. For every
// entry point nanobind does not wrap (vectorcall methods, slots, C callbacks).
inline void set_python_error_from_current_exception() noexcept {
    try {
        throw;
    } catch (const Error& e) {
        PyErr_SetString(python_exception_for(e.kind()), e.what());
    } catch (nanobind::python_error& e) {
        e.restore();
    } catch (const std::bad_alloc&) {
        PyErr_NoMemory();
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (...) {
        PyErr_SetString(PyExc_RuntimeError, "stridex: unknown C++ exception");
    }
}

}  // namespace stridex::python
