// CuPy's public C API (CuPy >= 14.3), written from cupy/public_c_api.pxd: the table CuPy exports
// as the capsule "cupy._public_c_api". Read by import_cupy.cpp; the test module builds a stand-in.
#pragma once

#include <Python.h>

#include <cstddef>

namespace stridex::python {

inline constexpr char kCupyApiCapsule[] = "cupy._public_c_api";

struct CupyMetadata {
    void* ptr;
    int ndim;
    int device_id;
    std::size_t size;
    Py_ssize_t itemsize;
    const Py_ssize_t* shape;
    const Py_ssize_t* strides;  // in bytes
    PyObject* dtype;            // a numpy.dtype, borrowed
};

// Append-only: later slots exist only from the version that added them. Every function returns
// -1 with a Python error set on failure, and needs the GIL.
struct CupyApi {
    int version_major;
    int version_minor;
    PyTypeObject* ndarray_type;
    int (*get_ndarray_ptr)(PyObject* array, void** ptr);
    int (*get_ndarray_metadata)(PyObject* array, CupyMetadata* out);
    int (*get_current_stream_ptr)(int device_id, void** stream);  // CuPy >= 14.3
};

}  // namespace stridex::python
