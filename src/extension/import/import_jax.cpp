// JAX arrays exported through jaxlib's own C++ function, without the Python layers of their
// __dlpack__ (import_dlpack.cpp tries this first for jaxlib's ArrayImpl itself): the shortcut
// jaxlib_export of the registry (shortcuts.cpp), which can be turned off.
//
// Why: ArrayImpl.__dlpack__ is Python. It reads sharding.device_set, calls jax's to_dlpack, which
// checks its arguments and calls _to_dlpack, which calls addressable_data(0), and only then calls
// jaxlib's buffer_to_dlpack_managed_tensor(buffer, stream), the C++ function that makes the
// capsule. The layers cost most of the call: 5.2 µs for __dlpack__() against 0.9 µs for the
// function alone, on a JAX 0.10 CPU array (docs/import.md, "JAX arrays"), and they kept a nanobind
// function taking stridex's caster level with nb::ndarray rather than below it.
//
// The rule: the capsule is the one __dlpack__ returns: the same function, given the same buffer
// and the same stream. The shortcut is taken only where __dlpack__ would reach that call with them:
//  - the type is jaxlib._jax.ArrayImpl itself, and its __dlpack__ is JAX's own (the function of
//    jax._src.array named ArrayImpl.__dlpack__, not one patched in);
//  - the array's sharding (the C++ getter ArrayImpl.sharding reads) is a SingleDeviceSharding whose
//    device list (C++, as the getters below) says it is addressable by this process: one device,
//    whose buffer is the one addressable_data(0) gives. __dlpack__ refuses arrays on more than one
//    device, and raises for one on another process's device; the function alone would export the
//    first shard of a sharded array, and reads a buffer that is not there for the other process's
//    array (a segmentation fault, seen with JAX 0.10 on two CPU processes);
//  - the buffer exported is the one __dlpack__ exports: addressable_data(0), which for a single
//    device array is ArrayImpl._fully_replicated_shard() (a C++ method), not the array itself. The
//    capsule holds an external reference on that shard; held on the user's array instead, it makes
//    the array's delete() abort the process (jaxlib checks that no such hold is left on the buffer
//    it deletes: "Non-zero type 1 hold on destruction"), where __dlpack__'s export survives it;
//  - stridex sends no dl_device and no copy (never), and max_version selects nothing in JAX: every
//    version it accepts gets the same legacy capsule.
// Anything else, and any Exception the shortcut raises (a deleted array, a stream for a CPU
// array), is left to __dlpack__ itself, whose answer and errors are JAX's own; a TypeError (a
// jaxlib whose function takes other arguments) also turns the shortcut off.
// tests/python/test_import_jax.py compares both paths.
#include "common/limited_api.hpp"
#include "import/importers.hpp"

#include <array>
#include <utility>

namespace stridex::python {
namespace {

// What was found of jaxlib when its ArrayImpl was last probed. The references are kept until a
// probe finds other objects, else for the life of the process (jaxlib is never unloaded).
struct Jaxlib {
    PyTypeObject* array = nullptr;           // jaxlib._jax.ArrayImpl
    PyTypeObject* single_device = nullptr;   // jaxlib._jax.SingleDeviceSharding
    PyObject* sharding_getter = nullptr;     // the C++ getter of ArrayImpl._sharding
    PyObject* device_list_getter = nullptr;  // ... of SingleDeviceSharding._internal_device_list
    PyObject* addressable_getter = nullptr;  // ... of DeviceList.is_fully_addressable
    PyObject* shard_method = nullptr;        // ArrayImpl._fully_replicated_shard (C++)
    PyObject* export_fn = nullptr;           // jaxlib._jax.buffer_to_dlpack_managed_tensor

    // Every reference, for what is done to all of them alike.
    std::array<PyObject*, 7> objects() const noexcept {
        return {reinterpret_cast<PyObject*>(array),
                reinterpret_cast<PyObject*>(single_device),
                sharding_getter,
                device_list_getter,
                addressable_getter,
                shard_method,
                export_fn};
    }
    bool complete() const noexcept {
        for (PyObject* o : objects())
            if (!o) return false;
        return true;
    }
};
Jaxlib g_jaxlib;

void release(const Jaxlib& j) noexcept {
    for (PyObject* o : j.objects()) Py_XDECREF(o);
}

bool text_is(PyObject* text, const char* expected) noexcept {
    return text && PyUnicode_Check(text) && PyUnicode_CompareWithASCIIString(text, expected) == 0;
}

// JAX's own ArrayImpl.__dlpack__, as jax._src.array defines it.
bool is_jax_dlpack(PyObject* dlpack) noexcept {
#ifdef Py_LIMITED_API
    if (!dlpack || std::strcmp(type_tp_name(Py_TYPE(dlpack)), "function") != 0) return false;
    PyObject* module = attr_or_null(dlpack, "__module__");
#else
    if (!dlpack || !PyFunction_Check(dlpack)) return false;
    PyObject* module = Py_XNewRef(PyFunction_GetModule(dlpack));
#endif
    PyObject* qualname = attr_or_null(dlpack, "__qualname__");
    const bool ok = text_is(module, "jax._src.array") && text_is(qualname, "ArrayImpl.__dlpack__");
    Py_XDECREF(qualname);
    Py_XDECREF(module);
    return ok;
}

// The getter of the property `name` of the class `type` (a new reference), or nullptr: the class
// attribute is the property itself.
PyObject* property_getter(PyTypeObject* type, const char* name) noexcept {
    PyObject* property = attr_or_null(reinterpret_cast<PyObject*>(type), name);
    PyObject* getter = property && Py_IS_TYPE(property, &PyProperty_Type) ? attr_or_null(property, "fget") : nullptr;
    Py_XDECREF(property);
    if (getter && !PyCallable_Check(getter)) Py_CLEAR(getter);
    return getter;
}

// What the loaded jaxlib offers (nothing is imported); complete() is false when anything is missing.
Jaxlib find_jaxlib() noexcept {
    constexpr char kModule[] = "jaxlib._jax";
    Jaxlib j;
    j.array = loaded_type(kModule, "ArrayImpl");
    j.single_device = loaded_type(kModule, "SingleDeviceSharding");
    PyTypeObject* device_list = loaded_type(kModule, "DeviceList");
    j.sharding_getter = property_getter(j.array, "_sharding");  // ArrayImpl.sharding returns self._sharding
    j.device_list_getter = property_getter(j.single_device, "_internal_device_list");
    j.addressable_getter = property_getter(device_list, "is_fully_addressable");
    Py_XDECREF(reinterpret_cast<PyObject*>(device_list));
    j.shard_method = attr_or_null(reinterpret_cast<PyObject*>(j.array), "_fully_replicated_shard");
    if (j.shard_method && !PyCallable_Check(j.shard_method)) Py_CLEAR(j.shard_method);
    j.export_fn = loaded_attr(kModule, "buffer_to_dlpack_managed_tensor");
    if (j.export_fn && !PyCallable_Check(j.export_fn)) Py_CLEAR(j.export_fn);
    return j;
}

}  // namespace

bool jaxlib_export_usable(PyTypeObject* type, const ProducerRow& row, PyObject* dlpack) noexcept {
    if (!row.takes(Shortcut::jaxlib_export) || !is_jax_dlpack(dlpack)) return false;
    const Jaxlib found = find_jaxlib();
    const bool usable = found.complete() && found.array == type;
    if (!usable || found.objects() == g_jaxlib.objects()) {
        release(found);  // not jaxlib's type, or what a probe before found (the common re-probe)
        return usable;
    }
    // Objects that replace others (jaxlib's module attributes were rebound). An export in progress
    // holds its own references (export_through_jaxlib), so the old ones can go.
    release(std::exchange(g_jaxlib, found));
    return true;
}

PyObject* export_through_jaxlib(PyObject* obj, PyObject* stream) {
    if (Py_TYPE(obj) != g_jaxlib.array) return nullptr;  // turned off (below) since the type was probed
    // Held for the call: a function that runs Python code may import a changed ArrayImpl, whose
    // probe replaces g_jaxlib and releases what it held.
    struct Held {
        Jaxlib j;
        explicit Held(const Jaxlib& from) noexcept : j(from) {
            for (PyObject* o : j.objects()) Py_INCREF(o);
        }
        ~Held() { release(j); }
    } held{g_jaxlib};
    const Jaxlib& j = held.j;
    // Each answer is a new reference, or nullptr with an error set.
    const auto get = [](PyObject* getter, PyObject* of) {
        PyObject* args[2] = {nullptr, of};  // a slot before args[0]: vectorcall may use it
        return PyObject_Vectorcall(getter, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
    };
    PyObject* sharding = get(j.sharding_getter, obj);
    if (sharding && !Py_IS_TYPE(sharding, j.single_device)) {
        Py_DECREF(sharding);
        return nullptr;  // more than one device, or a sharding that may say so
    }
    PyObject* devices = sharding ? get(j.device_list_getter, sharding) : nullptr;
    Py_XDECREF(sharding);
    PyObject* addressable = devices ? get(j.addressable_getter, devices) : nullptr;
    Py_XDECREF(devices);
    PyObject* capsule = nullptr;
    if (addressable) {
        const bool here = addressable == Py_True;
        Py_DECREF(addressable);
        if (!here) return nullptr;                   // another process's device
        PyObject* shard = get(j.shard_method, obj);  // addressable_data(0), as __dlpack__ exports it
        if (shard) {
            PyObject* args[3] = {nullptr, shard, stream};
            capsule = PyObject_Vectorcall(j.export_fn, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
            Py_DECREF(shard);
        }
    }
    if (capsule) return capsule;
    // __dlpack__ says it in JAX's words. Only a KeyboardInterrupt or the like is the answer itself.
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw nanobind::python_error();
    // A TypeError is a jaxlib whose function takes other arguments than these: no shortcut until a
    // probe finds jaxlib again (JAX's own errors for an array are JaxRuntimeErrors).
    if (PyErr_ExceptionMatches(PyExc_TypeError) && g_jaxlib.export_fn == j.export_fn)
        release(std::exchange(g_jaxlib, Jaxlib{}));
    PyErr_Clear();
    return nullptr;
}

}  // namespace stridex::python
