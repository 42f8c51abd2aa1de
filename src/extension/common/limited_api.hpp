// The extension under CPython's limited API (Py_LIMITED_API, set by nanobind's STABLE_ABI when
// CMake's STRIDEX_STABLE_ABI is on: the release's cp312-abi3 wheel, one module for CPython 3.12 and
// newer, 3.14 included). The per-version build (STRIDEX_STABLE_ABI off, the cp310-cp313 wheels)
// keeps CPython's macros and type struct, which the hot paths use.
//
// Two kinds of help, both of them the plain CPython spelling in a per-version build:
// - the non-limited macros the code uses, defined as the limited API's functions (the same
//   results; a call each instead of a load);
// - what PyTypeObject's fields say (name, sizes, slots), read through the type's attributes or
//   PyType_GetSlot.
// What the limited API cannot tell at all is decided where it is used: the per-type cache of
// stridex.view() (import_type_cache.hpp: the type's version tag), torch's requires_grad getter
// (import_type_cache.cpp), the sanitizer's Python stacks (sanitizer_log.cpp, sanitizer_report.cpp).
#pragma once

#include <Python.h>

#ifdef Py_LIMITED_API
#include <dlfcn.h>

#include <string>
#endif

#ifdef Py_LIMITED_API
// Checked: the limited API's functions these stand for take no shortcut the callers would miss
// (tuples and lists are checked by the callers first; the functions check again).
#define PyTuple_GET_SIZE(o) PyTuple_Size(o)
#define PyTuple_GET_ITEM(o, i) PyTuple_GetItem((o), (i))
#define PyTuple_SET_ITEM(o, i, v) static_cast<void>(PyTuple_SetItem((o), (i), (v)))
#define PyList_GET_SIZE(o) PyList_Size(o)
#define PyList_GET_ITEM(o, i) PyList_GetItem((o), (i))
#define PyUnicode_AsUTF8(o) PyUnicode_AsUTF8AndSize((o), nullptr)

inline PyObject* PyObject_CallOneArg(PyObject* callable, PyObject* arg) {
    PyObject* args[2] = {nullptr, arg};
    return PyObject_Vectorcall(callable, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}
inline PyObject* PyObject_CallMethodNoArgs(PyObject* self, PyObject* name) {
    return PyObject_CallMethodObjArgs(self, name, nullptr);
}
inline PyObject* PyObject_CallMethodOneArg(PyObject* self, PyObject* name, PyObject* arg) {
    return PyObject_CallMethodObjArgs(self, name, arg, nullptr);
}
#endif

namespace stridex::python {

#ifdef Py_LIMITED_API
namespace limited {
// An integer attribute of a type (__basicsize__, __dictoffset__, __weakrefoffset__), -1 if unread.
inline Py_ssize_t type_int(PyTypeObject* type, const char* name) noexcept {
    PyObject* v = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), name);
    const Py_ssize_t out = v ? PyLong_AsSsize_t(v) : -1;
    Py_XDECREF(v);
    if (out == -1 && PyErr_Occurred()) PyErr_Clear();
    return out;
}
}  // namespace limited
#endif

// The type's tp_name: "numpy.ndarray" for a C type of a module, "Foo" for a Python class, "int".
// Under the limited API it is rebuilt from __module__ and __name__ as CPython builds tp_name, into
// one of a few thread-local buffers: valid until a few more calls on this thread, enough for the
// error messages and probes that use it.
inline const char* type_tp_name(PyTypeObject* type) noexcept {
#ifdef Py_LIMITED_API
    static thread_local std::string ring[4];
    static thread_local unsigned next = 0;
    std::string& out = ring[next++ % 4];
    out.clear();
    try {
        auto text = [](PyObject* s, std::string& to) {
            const char* utf8 = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8AndSize(s, nullptr) : nullptr;
            if (utf8) to += utf8;
            return utf8 != nullptr;
        };
        if (!(PyType_GetFlags(type) & Py_TPFLAGS_HEAPTYPE)) {  // a C type's tp_name is "module.name"
            PyObject* module = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__");
            if (module && PyUnicode_Check(module) && PyUnicode_CompareWithASCIIString(module, "builtins") != 0 &&
                text(module, out))
                out += '.';
            Py_XDECREF(module);
        }
        PyObject* name = PyType_GetName(type);
        if (!text(name, out)) out += "?";
        Py_XDECREF(name);
        if (PyErr_Occurred()) PyErr_Clear();
    } catch (...) {
        out.clear();
    }
    return out.c_str();
#else
    return type->tp_name;
#endif
}

// The type's tp_basicsize (-1 if the limited API's attribute could not be read).
inline Py_ssize_t type_basicsize(PyTypeObject* type) noexcept {
#ifdef Py_LIMITED_API
    return limited::type_int(type, "__basicsize__");
#else
    return type->tp_basicsize;
#endif
}

// Whether the type's instances take weak references (PyType_SUPPORTS_WEAKREFS).
inline bool type_supports_weakrefs(PyTypeObject* type) noexcept {
#ifdef Py_LIMITED_API
    return limited::type_int(type, "__weakrefoffset__") != 0;  // negative: managed by CPython (3.12+)
#else
    return PyType_SUPPORTS_WEAKREFS(type);
#endif
}

// The current thread's state without the fatal error of PyThreadState_Get: nullptr while this
// thread does not hold the GIL (3.12 and newer; before, the GIL holder's). The limited API has no
// such call: there it is looked up once in the running interpreter (PyThreadState_GetUnchecked from
// 3.13, _PyThreadState_UncheckedGet in 3.12; both exported by every CPython since); nullptr
// returned by `available` false means "not known", and callers take the GIL as before 3.12.
inline PyThreadState* thread_state_unchecked(bool* available) noexcept {
#ifdef Py_LIMITED_API
    using Get = PyThreadState* (*)();
    static const Get get = [] {
        void* f = dlsym(RTLD_DEFAULT, "PyThreadState_GetUnchecked");
        if (!f) f = dlsym(RTLD_DEFAULT, "_PyThreadState_UncheckedGet");
        return reinterpret_cast<Get>(f);
    }();
    *available = get != nullptr;
    return get ? get() : nullptr;
#elif PY_VERSION_HEX >= 0x030D0000
    *available = true;
    return PyThreadState_GetUnchecked();
#elif PY_VERSION_HEX >= 0x030C0000
    *available = true;
    return _PyThreadState_UncheckedGet();
#else
    *available = false;
    return nullptr;
#endif
}

// Py_IsFinalizing (3.13; _Py_IsFinalizing before). The limited API of 3.12 has neither: looked up
// once in the running interpreter, as above; false if neither is found.
inline bool interpreter_is_finalizing() noexcept {
#ifdef Py_LIMITED_API
    using Get = int (*)();
    static const Get get = [] {
        void* f = dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
        if (!f) f = dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
        return reinterpret_cast<Get>(f);
    }();
    return get && get();
#elif PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

}  // namespace stridex::python
