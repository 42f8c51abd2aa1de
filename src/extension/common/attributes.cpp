// Attribute lookups and the swallow rule for their errors (attributes.hpp).
#include "common/attributes.hpp"

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
#if PY_VERSION_HEX >= 0x030D0000
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
    if (PyMethod_Check(callable)) return PyMethod_GET_SELF(callable);
    if (PyCFunction_Check(callable)) {
        PyObject* self = PyCFunction_GET_SELF(callable);
        return self && !PyModule_Check(self) ? self : nullptr;  // a module function has its module
    }
    return nullptr;
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
