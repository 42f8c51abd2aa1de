// CuPy arrays read from CuPy's own description of them, without calling __dlpack__ (import.cpp
// tries this first for cupy.ndarray itself).
//
// Why: cupy.ndarray.__dlpack__ asks the CUDA runtime about the pointer, wraps the answer in a
// Python object and mallocs twice, every call; on an H100 that cost more than all of stridex's
// own import, and kept stridex.view(cupy_array) above nanobind's cost.
//
// Two shortcuts of the registry (shortcuts.cpp), each of which can be turned off: cupy_c_api and
// cupy_layout. Where the description comes from (found when cupy.ndarray is first seen):
//  - CuPy >= 14.3: CuPy's public C API, the capsule cupy._public_c_api (get_ndarray_metadata,
//    get_current_stream_ptr), documented in cupy/public_c_api.pxd.
//  - CuPy 13.4 to 14.2: the object layout of CuPy's _ndarray_base and MemoryPointer, which CuPy's
//    public header reads itself for every version before 14.3 (it calls CuPy 8 to 14.2 ABI
//    stable), and the current stream from get_stream_ptr(device), the function of
//    cupy_backends.cuda.stream that CuPy's own modules cimport (taken from its Cython C-API table
//    only under its exact C signature). The layout is read only from instances of cupy.ndarray
//    itself whose __dlpack__ is the C method of a base named cupy._core.core._ndarray_base of
//    exactly the layout's size: no Python class passes for that without inheriting the struct.
//
// The rule: the View is the one __dlpack__ gives. Same pointer, shape, element strides (the true
// ones: the unsigned division of cupy#10172 is __dlpack__'s alone), dtype, device (kDLCUDAManaged
// for managed memory, asked of the driver where CuPy asks the runtime, kDLCUDA otherwise), writable
// (CuPy's tensors carry no flags); the owner keeps the array alive, as CuPy's deleter does. Streams
// follow the exchange API's contract: nothing is synchronized here, the data is ready in the order
// of CuPy's current stream for the array's device, and stridex orders the caller's stream after it
// with an event where they differ, as __dlpack__(stream=...) does with its own event. (With
// NO_SYNC the View names that stream where the __dlpack__ path can name none.)
//
// Whatever is not certain answers false and __dlpack__ decides: dtypes DLPack has no code for
// (bfloat16 through ml_dtypes), byte-swapped data, a NULL data pointer (empty arrays), memory the
// driver cannot place, and ROCm builds of CuPy. Strides that are not whole elements are refused
// (BufferError): __dlpack__ would floor-divide them into a description of other memory.
// tests/python/test_import_cupy.py compares both paths on a GPU.
#include <cstring>

#include "common/limited_api.hpp"
#include "export/py_owner.hpp"
#include "import/cupy_api.hpp"
#include "import/importers.hpp"
#include "stridex/cuda/pointer.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/error.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

// ---- CuPy 13.4 to 14.2: the object layout (64-bit) ----
// A std::vector member is read as its three pointers (begin, end, end of storage): the layout of
// libstdc++ and libc++ alike.
struct CupyVector {
    const Py_ssize_t* begin;
    const Py_ssize_t* end;
    const Py_ssize_t* storage_end;
};
struct CupyMemoryPointer {
    PyObject_HEAD
    void* vtable;
    std::intptr_t ptr;
    int device_id;
    PyObject* mem;
};
struct CupyArrayLayout {
    PyObject_HEAD
    void* vtable;
    PyObject* weakrefs;
    Py_ssize_t size;
    CupyVector shape;
    CupyVector strides;  // in bytes
    int c_contiguous, f_contiguous, index_32_bits;
    PyObject* dtype;
    CupyMemoryPointer* data;
    PyObject* base;
};
// The __basicsize__ of _ndarray_base and MemoryPointer in CuPy 14.2 on x86-64, checked against the
// live types before the layout is trusted.
static_assert(sizeof(CupyArrayLayout) == 128 && sizeof(CupyMemoryPointer) == 48);
static_assert(sizeof(Py_ssize_t) == sizeof(std::int64_t));  // shapes are read as int64 in place
constexpr char kLayoutBase[] = "cupy._core.core._ndarray_base";
constexpr char kStreamSignature[] = "intptr_t (int)";  // cdef intptr_t get_stream_ptr(int) except? -1

// What was found of CuPy when cupy.ndarray was last probed (the type cache probes a type again only
// when it changes). The references are kept for the life of the process, as CuPy is never unloaded.
struct Cupy {
    PyTypeObject* ndarray = nullptr;                   // cupy.ndarray
    PyTypeObject* dtype_type = nullptr;                // numpy.dtype
    const CupyApi* api = nullptr;                      // >= 14.3
    PyTypeObject* memory_pointer = nullptr;            // < 14.3: cupy.cuda.memory.MemoryPointer
    std::intptr_t (*stream_of_device)(int) = nullptr;  // < 14.3: get_stream_ptr
};
Cupy g_cupy;

bool cupy_is_cuda_build() noexcept {
    PyObject* hip = loaded_attr("cupy_backends.cuda.api.runtime", "is_hip");
    const bool cuda = hip == Py_False;
    Py_XDECREF(hip);
    return cuda;
}

// Fills g_cupy from what CuPy has loaded, through the C API only where `c_api` and the layout
// only where `layout` (the two shortcuts); false (and g_cupy untouched) when anything is missing.
bool find_cupy(bool c_api, bool layout) noexcept {
    Cupy c;
    c.ndarray = loaded_type("cupy", "ndarray");
    c.dtype_type = loaded_type("numpy", "dtype");
    bool ok = c.ndarray && c.dtype_type && cupy_is_cuda_build();
    if (ok && c_api) {
        PyObject* capsule = loaded_attr("cupy", "_public_c_api");
        if (capsule && PyCapsule_IsValid(capsule, kCupyApiCapsule)) {
            const auto* api = static_cast<const CupyApi*>(PyCapsule_GetPointer(capsule, kCupyApiCapsule));
            // get_current_stream_ptr is a slot of 14.3 and later only.
            if (api && api->ndarray_type == c.ndarray &&
                (api->version_major > 14 || (api->version_major == 14 && api->version_minor >= 3)) &&
                api->get_ndarray_metadata && api->get_current_stream_ptr)
                c.api = api;
        }
        Py_XDECREF(capsule);  // the table is static data of CuPy's module
    }
    if (ok && !c.api) {
        ok = layout;
        if (ok) {
            PyObject* version = loaded_attr("cupy", "__version__");
            const char* text = version && PyUnicode_Check(version) ? PyUnicode_AsUTF8(version) : nullptr;
            const Version v = text ? parse_version(text) : Version{-1, -1, -1};
            PyErr_Clear();
            Py_XDECREF(version);
            c.memory_pointer = loaded_type("cupy.cuda.memory", "MemoryPointer");
            PyObject* table = loaded_attr("cupy_backends.cuda.stream", "__pyx_capi__");
            PyObject* entry = table && PyDict_Check(table) ? PyDict_GetItemString(table, "get_stream_ptr") : nullptr;
            if (entry && PyCapsule_IsValid(entry, kStreamSignature))
                c.stream_of_device = reinterpret_cast<std::intptr_t (*)(int)>(
                    PyCapsule_GetPointer(entry, kStreamSignature));
            Py_XDECREF(table);
            ok = Version{13, 4, 0} <= v && v < Version{14, 3, 0} && c.memory_pointer &&
                 type_basicsize(c.memory_pointer) == static_cast<Py_ssize_t>(sizeof(CupyMemoryPointer)) &&
                 c.stream_of_device;
        }
    }
    PyErr_Clear();
    if (!ok) {
        Py_XDECREF(reinterpret_cast<PyObject*>(c.ndarray));
        Py_XDECREF(reinterpret_cast<PyObject*>(c.dtype_type));
        Py_XDECREF(reinterpret_cast<PyObject*>(c.memory_pointer));
        return false;
    }
    // The previous find's references stay: an import in progress may still use them (the type cache's
    // parked entries), and there is one per probe of cupy.ndarray.
    g_cupy = c;
    return true;
}

// CuPy's current stream for a device, as an encoded stridex stream (NULL, CuPy's null stream, is
// the legacy default stream).
std::intptr_t current_stream(int device_id) {
    void* handle = nullptr;
    if (g_cupy.api) {
        if (g_cupy.api->get_current_stream_ptr(device_id, &handle) != 0) throw nb::python_error();
    } else {
        const std::intptr_t ptr = g_cupy.stream_of_device(device_id);
        if (ptr == -1 && PyErr_Occurred()) throw nb::python_error();
        handle = reinterpret_cast<void*>(ptr);
    }
    return cuda::StreamRef::from_handle(static_cast<cuda::CUstream>(handle)).encoded();
}

// What an array says of itself, borrowed from it.
struct Described {
    void* data;
    int ndim;
    int device_id;
    const Py_ssize_t* shape;
    const Py_ssize_t* strides;  // in bytes
    PyObject* dtype;
};

// False when the array's own description is not to be had (the layout path's data member is not
// a MemoryPointer, or its vectors disagree); throws what CuPy's API raises.
bool describe(PyObject* obj, Described* out) {
    if (g_cupy.api) {
        CupyMetadata m{};
        if (g_cupy.api->get_ndarray_metadata(obj, &m) != 0) throw nb::python_error();
        *out = {m.ptr, m.ndim, m.device_id, m.shape, m.strides, m.dtype};
        return true;
    }
    const auto* array = reinterpret_cast<const CupyArrayLayout*>(obj);
    CupyMemoryPointer* memory = array->data;
    if (!memory || !PyObject_TypeCheck(reinterpret_cast<PyObject*>(memory), g_cupy.memory_pointer)) return false;
    const std::ptrdiff_t ndim = array->shape.end - array->shape.begin;
    if (ndim != array->strides.end - array->strides.begin || ndim > kMaxNdim) return false;
    *out = {reinterpret_cast<void*>(memory->ptr),
            static_cast<int>(ndim),
            memory->device_id,
            array->shape.begin,
            array->strides.begin,
            array->dtype};
    return true;
}

}  // namespace

bool cupy_struct_readable(PyTypeObject* type, const ProducerRow& row, PyObject* dlpack) noexcept {
    const bool c_api = row.takes(Shortcut::cupy_c_api), layout = row.takes(Shortcut::cupy_layout);
    if (!(c_api || layout) || !dlpack || !find_cupy(c_api, layout) || type != g_cupy.ndarray) return false;
    if (g_cupy.api) return true;
    // The layout path: __dlpack__ is the C method of CuPy's base type, whose struct it describes.
    if (Py_TYPE(dlpack) != &PyMethodDescr_Type) return false;
#ifdef Py_LIMITED_API
    PyObject* objclass = PyObject_GetAttrString(dlpack, "__objclass__");  // the descriptor's d_type
    if (!objclass) PyErr_Clear();
    Py_XDECREF(objclass);  // borrowed from here on: the descriptor holds it
    PyTypeObject* base = objclass && PyType_Check(objclass) ? reinterpret_cast<PyTypeObject*>(objclass) : nullptr;
#else
    PyTypeObject* base = reinterpret_cast<PyMethodDescrObject*>(dlpack)->d_common.d_type;
#endif
    return base && std::strcmp(type_tp_name(base), kLayoutBase) == 0 &&
           type_basicsize(base) == static_cast<Py_ssize_t>(sizeof(CupyArrayLayout)) && PyType_IsSubtype(type, base);
}

bool import_cupy_struct(PyObject* obj, View* at, std::intptr_t& ready) {
    Described d{};
    Dtype dtype;
    if (!describe(obj, &d) || d.data == nullptr || d.ndim < 0 || d.ndim > kMaxNdim || d.device_id < 0 || !d.dtype ||
        !PyObject_TypeCheck(d.dtype, g_cupy.dtype_type) || !numpy_dtype_of(d.dtype, &dtype))
        return false;
    const auto ndim = static_cast<std::size_t>(d.ndim);
    // Byte strides that are not whole elements are a BufferError, as for every interface that
    // states byte strides: __dlpack__ would floor-divide them and so describe other memory.
    Layout layout = Layout::from_byte_strides(
        std::span<const std::int64_t>(reinterpret_cast<const std::int64_t*>(d.shape), ndim),
        std::span<const std::int64_t>(reinterpret_cast<const std::int64_t*>(d.strides), ndim), dtype.itemsize());
    const std::optional<bool> managed = cuda::is_managed_memory(reinterpret_cast<std::uintptr_t>(d.data));
    if (!managed) return false;
    ready = current_stream(d.device_id);
    const Device device{*managed ? DeviceType::kCUDAManaged : DeviceType::kCUDA, d.device_id};
    new (at) View(d.data, 0, std::move(layout), dtype, device, Writability::writable, owner_of(obj));
    return true;
}

Shortcut cupy_struct_shortcut() noexcept { return g_cupy.api ? Shortcut::cupy_c_api : Shortcut::cupy_layout; }

StreamRequest cupy_caller_stream(PyObject* obj) {
    Described d{};
    if (!describe(obj, &d) || d.device_id < 0) return {};
    return {StreamRequest::Kind::on_stream, current_stream(d.device_id)};
}

}  // namespace stridex::python
