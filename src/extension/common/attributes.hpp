// Attribute lookups on producers' objects and types, and the rule for their errors.
//
// The rule: where stridex swallows a producer's error to try something else (an absent attribute,
// a property that raises, a protocol that refuses), only Exception subclasses are swallowed. A
// KeyboardInterrupt, SystemExit or GeneratorExit raised in a producer's code propagates: the user
// pressed Ctrl-C during the import, not the producer's protocol failing (docs/import.md, "Errors").
//
// Everything here runs with the GIL held.
#pragma once

#include <Python.h>

#include "common/limited_api.hpp"

#include <nanobind/nanobind.h>

namespace stridex::python {

// The swallow rule for the error that is set (if any): an Exception is cleared (true); anything
// else stays set (false), for the caller to raise. True when no error is set.
bool clear_exception() noexcept;
// The same for callers that may throw: an Exception is cleared; anything else is thrown as
// nb::python_error.
void clear_exception_or_throw();

// obj.name (a new reference), or nullptr when absent, without raising (and clearing) an
// AttributeError where the interpreter can avoid it. Any other error propagates as
// nb::python_error. `name` is an interned name (names.hpp). Inline: the import of objects that
// carry their protocols on the instance (proxies, test doubles) pays it on every call.
inline PyObject* optional_attr(PyObject* obj, PyObject* name) {
    PyObject* out = nullptr;
#ifdef Py_LIMITED_API
    out = PyObject_GetAttr(obj, name);
    if (!out) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw nanobind::python_error();
        PyErr_Clear();
    }
#elif PY_VERSION_HEX >= 0x030D0000
    if (PyObject_GetOptionalAttr(obj, name, &out) < 0) throw nanobind::python_error();
#else
    if (_PyObject_LookupAttr(obj, name, &out) < 0) throw nanobind::python_error();
#endif
    return out;
}

// A class attribute found through the MRO (a new reference), without running any code, or
// nullptr. None is absent: `__dlpack__ = None` in a subclass says "no DLPack here" (as
// `__hash__ = None` does), so the next protocol is tried.
PyObject* type_lookup(PyTypeObject* type, PyObject* name) noexcept;

// Functions, method descriptors and nanobind methods: callable with self as the first argument
// (what CPython's own LOAD_METHOD relies on).
inline bool method_like(PyObject* descriptor) noexcept {
    return PyType_HasFeature(Py_TYPE(descriptor), Py_TPFLAGS_METHOD_DESCRIPTOR);
}

// The object a bound method (Python or C) is bound to, or nullptr (borrowed).
PyObject* bound_self(PyObject* callable) noexcept;

// What the readers of a framework's own objects (import_cupy.cpp, import_jax.cpp) look up when a
// type is probed. Each returns a new reference, or nullptr: with no error set when the lookup
// failed with an Exception (cleared), and with the error still set when it was anything else (a
// KeyboardInterrupt), for the caller to raise. Nothing is imported.
PyObject* attr_or_null(PyObject* obj, const char* name) noexcept;          // obj.name (obj may be NULL)
PyObject* loaded_attr(const char* module, const char* name) noexcept;      // sys.modules[module].name
PyTypeObject* loaded_type(const char* module, const char* name) noexcept;  // the same, if it is a type

}  // namespace stridex::python
