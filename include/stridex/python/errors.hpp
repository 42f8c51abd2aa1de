// stridex::Error -> Python exceptions: the one table, shared by the _stridex extension (nanobind's
// translator, its raw CPython entry points, the exchange API's SetError) and by the header-only
// casters of extension authors (nanobind and pybind11 alike, so it needs neither).
#pragma once

#include <Python.h>

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

}  // namespace stridex::python
