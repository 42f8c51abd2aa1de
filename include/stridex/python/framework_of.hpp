// Which framework a Python type belongs to: the one rule shared by the _stridex extension (the
// producer quirk row of a type) and by the header-only casters (the from_dlpack that `like=`
// returns through). A subclass defined elsewhere (a torch.Tensor subclass in user code) inherits
// its framework's exports, so it belongs to the framework of its nearest base that has one.
#pragma once

#include <Python.h>

namespace stridex::python {

// Calls found(module) with the __module__ of each class of type's MRO in order (the type first,
// `object` left out; a class whose __module__ is not a str is skipped) until it returns non-null,
// and returns that; nullptr when no class answers. A type not yet ready (no MRO) is asked alone.
// Needs the GIL; leaves no Python error set.
template <class Found>
auto framework_of(PyTypeObject* type, Found&& found) -> decltype(found("")) {
    auto ask = [&](PyObject* cls) -> decltype(found("")) {
        PyObject* module = PyObject_GetAttrString(cls, "__module__");
        const char* name = module && PyUnicode_Check(module) ? PyUnicode_AsUTF8AndSize(module, nullptr) : nullptr;
        if (!name) PyErr_Clear();
        auto answer = name ? found(name) : nullptr;
        Py_XDECREF(module);
        return answer;
    };
#ifdef Py_LIMITED_API  // an extension for CPython's stable ABI (the type struct is opaque there)
    PyObject* mro = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__mro__");
    if (mro == nullptr) PyErr_Clear();
    struct Release {
        PyObject* o;
        ~Release() { Py_XDECREF(o); }
    } release{mro};
#else
    PyObject* mro = type->tp_mro;  // a tuple once the type is ready
#endif
    if (mro == nullptr || !PyTuple_Check(mro)) return ask(reinterpret_cast<PyObject*>(type));
    for (Py_ssize_t i = 0; i < PyTuple_Size(mro); ++i) {
        PyObject* cls = PyTuple_GetItem(mro, i);
        if (cls == reinterpret_cast<PyObject*>(&PyBaseObject_Type)) break;
        if (auto answer = ask(cls)) return answer;
    }
    return nullptr;
}

}  // namespace stridex::python
