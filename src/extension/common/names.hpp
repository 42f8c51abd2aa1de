// The Python names the extension looks up or matches, interned once at module init (intern_names,
// called first by module.cpp): one list, in the X-macro style of nanobind's NB_INTERNED_STRINGS.
//
// An interned name makes an attribute lookup skip hashing a fresh string, and lets a keyword
// argument be matched by one pointer compare (CPython interns the keywords of a call written in
// source). Add a name here, never a PyUnicode_InternFromString elsewhere. (The header-only casters,
// include/stridex/python/caster_core.hpp, live in other modules and keep their own few.)
#pragma once

#include <Python.h>

namespace stridex::python {

// X(field, "text")
#define STRIDEX_INTERNED_NAMES(X) \
    /* the protocols, looked up on producers */ \
    X(dlpack, "__dlpack__") \
    X(dlpack_device, "__dlpack_device__") \
    X(exchange_api, "__dlpack_c_exchange_api__")     /* DLPack 1.3, a capsule */ \
    X(exchange_api_int, "__c_dlpack_exchange_api__") /* DLPack 1.2, an int */ \
    X(cuda_array_interface, "__cuda_array_interface__") \
    X(array_interface, "__array_interface__") \
    /* attributes of producers' objects */ \
    X(dtype, "dtype") \
    X(name, "name") \
    X(requires_grad, "requires_grad") /* torch */ \
    X(is_conj, "is_conj")             /* torch */ \
    /* interface dict keys ("stream" is also stridex.view's and __dlpack__'s keyword) */ \
    X(version, "version") \
    X(shape, "shape") \
    X(typestr, "typestr") \
    X(data, "data") \
    X(strides, "strides") \
    X(mask, "mask") \
    X(stream, "stream") \
    X(offset, "offset") \
    X(descr, "descr") \
    /* __dlpack__'s other keywords */ \
    X(max_version_kw, "max_version") \
    X(dl_device, "dl_device") \
    X(copy, "copy") \
    /* stridex.view's constraint keywords (import.cpp; dtype and shape are above) */ \
    X(ndim, "ndim") \
    X(device, "device") \
    X(writable, "writable") \
    X(contiguous, "contiguous") \
    /* stream objects (stream_policy.cpp) */ \
    X(cuda_stream_protocol, "__cuda_stream__") \
    X(cuda_stream, "cuda_stream") /* torch */ \
    X(ptr, "ptr")                 /* CuPy */ \
    X(handle, "handle")           /* Numba */ \
    X(value, "value")             /* ctypes.c_void_p */ \
    X(module, "__module__")

struct Names {
#define STRIDEX_NAME_FIELD(field, text) PyObject* field;
    STRIDEX_INTERNED_NAMES(STRIDEX_NAME_FIELD)
#undef STRIDEX_NAME_FIELD
    // Made from the names above: the keyword tuples and the max_version value stridex sends.
    PyObject* kw_stream_max_version;  // ("stream", "max_version")
    PyObject* kw_max_version;         // ("max_version",)
    PyObject* kw_stream;              // ("stream",)
    PyObject* max_version;            // (1, 3): dlpack::kMajorVersion, kMinorVersion
};
extern Names names;

// Interns every name (once; the references live as long as the process). Throws nb::python_error.
void intern_names();

}  // namespace stridex::python
