// stridex::Error -> Python exceptions: the one table, shared by the _stridex extension (nanobind's
// translator, its raw CPython entry points, the exchange API's SetError) and by the header-only
// casters of extension authors (nanobind and pybind11 alike, so it needs neither).
#pragma once

#include <Python.h>

#include <exception>
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
        case ErrorKind::memory: return PyExc_MemoryError;
    }
    return PyExc_RuntimeError;
}

// Sets the Python error for the C++ exception being handled, for entry points that no binding
// library wraps (vectorcall methods, slots, C callbacks, noexcept caster entry points):
// `Carrier`, the exception type that carries a Python error already (nanobind::python_error, the
// casters' PythonError), goes back through `restore(e)`; stridex::Error by kind; bad_alloc as
// MemoryError; anything else RuntimeError.
template <class Carrier, class Restore>
void set_python_error_for_current_exception(Restore restore) noexcept {
    try {
        throw;
    } catch (Carrier& e) {
        restore(e);
    } catch (const Error& e) {
        PyErr_SetString(python_exception_for(e.kind()), e.what());
    } catch (const std::bad_alloc&) {
        PyErr_NoMemory();
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (...) {
        PyErr_SetString(PyExc_RuntimeError, "stridex: unknown C++ exception");
    }
}

// Its name, for C interfaces that report errors as text (the exchange API's SetError).
// Written out, as extensions built for CPython's limited API cannot read a type's tp_name.
inline const char* python_exception_name(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::buffer:
        case ErrorKind::unsupported: return "BufferError";
        case ErrorKind::type: return "TypeError";
        case ErrorKind::value: return "ValueError";
        case ErrorKind::index: return "IndexError";
        case ErrorKind::cuda: return "RuntimeError";
        case ErrorKind::memory: return "MemoryError";
    }
    return "RuntimeError";
}

}  // namespace stridex::python
