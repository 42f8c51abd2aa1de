// Attribute lookups and the swallow rule for their errors (attributes.hpp).
#include "common/attributes.hpp"

#include <cstring>

#include "common/limited_api.hpp"

namespace nb = nanobind;

namespace stridex::python {

bool clear_exception() noexcept {
    PyObject* type = PyErr_Occurred();  // borrowed
    if (type == nullptr) return true;
    if (!PyErr_GivenExceptionMatches(type, PyExc_Exception)) return false;
    PyErr_Clear();
    return true;
}

void clear_exception_or_throw() {
    if (!clear_exception()) throw nb::python_error();
}

PyObject* type_lookup(PyTypeObject* type, PyObject* name) noexcept {
#ifdef Py_LIMITED_API
    // _PyType_Lookup's walk: the first class of the MRO whose own __dict__ has the name.
    PyObject* found = nullptr;
    PyObject* mro = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__mro__");
    const Py_ssize_t n = mro && PyTuple_Check(mro) ? PyTuple_Size(mro) : 0;
    for (Py_ssize_t i = 0; i < n && !found; ++i) {
        PyObject* dict = PyObject_GetAttrString(PyTuple_GetItem(mro, i), "__dict__");  // a mappingproxy
        found = dict ? PyObject_GetItem(dict, name) : nullptr;
        Py_XDECREF(dict);
        if (!found) PyErr_Clear();
    }
    Py_XDECREF(mro);
    if (PyErr_Occurred()) PyErr_Clear();
#elif PY_VERSION_HEX >= 0x030D0000
    PyObject* found = _PyType_LookupRef(type, name);
#else
    PyObject* found = _PyType_Lookup(type, name);
    Py_XINCREF(found);
#endif
    if (found == Py_None) {
        Py_DECREF(found);
        return nullptr;
    }
    return found;
}

PyObject* bound_self(PyObject* callable) noexcept {
#ifdef Py_LIMITED_API
    // A bound method's __self__ (a C function's: its module for a module function). The limited API
    // has no PyMethod_Check: a Python bound method is recognised by its type's name.
    if (PyCFunction_Check(callable)) {
        PyObject* self = PyCFunction_GetSelf(callable);
        return self && !PyModule_Check(self) ? self : nullptr;
    }
    if (std::strcmp(type_tp_name(Py_TYPE(callable)), "method") != 0) return nullptr;
    PyObject* self = PyObject_GetAttrString(callable, "__self__");
    if (!self) {
        PyErr_Clear();
        return nullptr;
    }
    Py_DECREF(self);  // borrowed, as PyMethod_GET_SELF: the method holds it
    return self;
#else
    if (PyMethod_Check(callable)) return PyMethod_GET_SELF(callable);
    if (PyCFunction_Check(callable)) {
        PyObject* self = PyCFunction_GET_SELF(callable);
        return self && !PyModule_Check(self) ? self : nullptr;  // a module function has its module
    }
    return nullptr;
#endif
}

PyObject* attr_or_null(PyObject* obj, const char* name) noexcept {
    PyObject* out = obj ? PyObject_GetAttrString(obj, name) : nullptr;
    if (!out) clear_exception();
    return out;
}

PyObject* loaded_attr(const char* module, const char* name) noexcept {
    PyObject* modules = PyImport_GetModuleDict();
    return attr_or_null(modules ? PyDict_GetItemString(modules, module) : nullptr, name);  // borrowed module
}

PyTypeObject* loaded_type(const char* module, const char* name) noexcept {
    PyObject* t = loaded_attr(module, name);
    if (t && PyType_Check(t)) return reinterpret_cast<PyTypeObject*>(t);
    Py_XDECREF(t);
    return nullptr;
}

}  // namespace stridex::python
