// NumPy arrays read from NumPy's own struct, without calling __dlpack__ (import.cpp tries this
// first for numpy.ndarray itself): the shortcut numpy_struct of the registry (shortcuts.cpp), which
// can be turned off.
//
// Why: numpy.ndarray.__dlpack__ costs more than all the rest of stridex.view() together (keyword
// parsing, a malloc'd tensor, a capsule), and everything it reports is in the array's struct. The
// fields read here are NumPy's public C ABI, which C extensions compiled against NumPy 1.x still
// use under 2.x: PyArrayObject_fields (data, nd, dimensions, strides, base, descr, flags) and
// PyArray_Descr's byteorder and type_num, at the same offsets in NumPy 1.7 to 2.x.
//
// The rule: the View is exactly the one __dlpack__ would give (NumPy >= 2.1, versioned capsule:
// same pointer, shape, element strides, dtype, device, read-only flag; the owner keeps the array
// alive, as NumPy's deleter does). Whatever the fast path is not sure of answers false, and the
// import goes on through __dlpack__, which decides: dtypes DLPack has no code for, byte-swapped
// data, strides that are not whole elements, and arrays whose memory NumPy itself imported
// through DLPack (their __dlpack_device__ reports the producer's device, kDLCUDAHost say, which
// the struct does not record). tests/python/test_import_numpy.py compares both paths.
#include <bit>
#include <cstring>

#include "common/limited_api.hpp"
#include "export/py_owner.hpp"
#include "import/importers.hpp"

namespace stridex::python {
namespace {

// The stable prefixes of NumPy's structs, written from NumPy's C API documentation.
struct NumpyDescr {
    PyObject_HEAD
    PyTypeObject* typeobj;
    char kind;
    char type;
    char byteorder;  // '=' native, '|' not applicable, '<' little-endian, '>' big-endian
    char former_flags;
    int type_num;
};
struct NumpyArray {
    PyObject_HEAD
    char* data;
    int nd;
    Py_intptr_t* dimensions;
    Py_intptr_t* strides;  // in bytes
    PyObject* base;
    NumpyDescr* descr;
    int flags;
};
static_assert(sizeof(Py_intptr_t) == sizeof(std::int64_t));
constexpr int kWriteable = 0x0400;  // NPY_ARRAY_WRITEABLE

// NumPy's builtin type numbers that DLPack describes, by C type where NumPy's are C types.
bool dtype_of(int type_num, Dtype* out) noexcept {
    constexpr auto c_int = [](std::size_t bytes, bool is_signed) {
        return Dtype{is_signed ? DtypeCode::kInt : DtypeCode::kUInt, static_cast<std::uint8_t>(8 * bytes), 1};
    };
    switch (type_num) {
        case 0: *out = dtypes::bool_; return true;                     // NPY_BOOL
        case 1: *out = dtypes::int8; return true;                      // NPY_BYTE
        case 2: *out = dtypes::uint8; return true;                     // NPY_UBYTE
        case 3: *out = c_int(sizeof(short), true); return true;        // NPY_SHORT
        case 4: *out = c_int(sizeof(short), false); return true;       // NPY_USHORT
        case 5: *out = c_int(sizeof(int), true); return true;          // NPY_INT
        case 6: *out = c_int(sizeof(int), false); return true;         // NPY_UINT
        case 7: *out = c_int(sizeof(long), true); return true;         // NPY_LONG
        case 8: *out = c_int(sizeof(long), false); return true;        // NPY_ULONG
        case 9: *out = c_int(sizeof(long long), true); return true;    // NPY_LONGLONG
        case 10: *out = c_int(sizeof(long long), false); return true;  // NPY_ULONGLONG
        case 11: *out = dtypes::float32; return true;                  // NPY_FLOAT
        case 12: *out = dtypes::float64; return true;                  // NPY_DOUBLE
        case 14: *out = dtypes::complex64; return true;                // NPY_CFLOAT
        case 15: *out = dtypes::complex128; return true;               // NPY_CDOUBLE
        case 23: *out = dtypes::float16; return true;                  // NPY_HALF
        default: return false;  // long double, objects, strings, datetimes, void, user dtypes
    }
}

bool native_order(char byteorder) noexcept {
    constexpr char swapped = std::endian::native == std::endian::little ? '>' : '<';
    return byteorder != swapped;
}

// True when the outermost base of the array's memory is a capsule (NumPy imported it through
// DLPack, and its __dlpack_device__ reports that producer's device), or cannot be found.
bool memory_maybe_from_dlpack(const NumpyArray* array, PyTypeObject* ndarray) noexcept {
    PyObject* base = array->base;
    // NumPy collapses chains of views to one hop; the bound only guards against the absurd.
    for (int hop = 0; hop < 64 && base && PyObject_TypeCheck(base, ndarray); ++hop)
        base = reinterpret_cast<const NumpyArray*>(base)->base;
    return base && (PyCapsule_CheckExact(base) || PyObject_TypeCheck(base, ndarray));
}

}  // namespace

bool numpy_dtype_of(PyObject* descr, Dtype* out) noexcept {
    const auto* d = reinterpret_cast<const NumpyDescr*>(descr);
    return dtype_of(d->type_num, out) && native_order(d->byteorder);
}

bool numpy_struct_readable(PyTypeObject* type, const ProducerRow& row) noexcept {
    // numpy.ndarray itself (a static type: no Python class can pose as it), from a NumPy whose row
    // says so (its __dlpack__ answers with versioned capsules: the read-only flag is the one it
    // reports), while the shortcut is on (shortcuts.hpp).
    return row.takes(Shortcut::numpy_struct) && std::strcmp(type_tp_name(type), "numpy.ndarray") == 0 &&
           !PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) &&
           type_basicsize(type) >= static_cast<Py_ssize_t>(sizeof(NumpyArray));
}

bool import_numpy_struct(PyObject* obj, View* at) {
    const auto* array = reinterpret_cast<const NumpyArray*>(obj);
    Dtype dtype;
    if (array->nd < 0 || array->nd > kMaxNdim || !array->descr ||
        !numpy_dtype_of(reinterpret_cast<PyObject*>(array->descr), &dtype) ||
        memory_maybe_from_dlpack(array, Py_TYPE(obj)))
        return false;
    const auto ndim = static_cast<std::size_t>(array->nd);
    const std::int64_t itemsize = dtype.itemsize();
    std::int64_t strides[kMaxNdim];
    for (std::size_t i = 0; i < ndim; ++i) {
        if (array->strides[i] % itemsize != 0) return false;
        strides[i] = array->strides[i] / itemsize;
    }
    const std::span<const std::int64_t> shape(reinterpret_cast<const std::int64_t*>(array->dimensions), ndim);
    const Writability writability = (array->flags & kWriteable) ? Writability::writable : Writability::readonly;
    new (at) View(array->data, 0, Layout(shape, std::span<const std::int64_t>(strides, ndim)), dtype, Device::cpu(),
                  writability, owner_of(obj));
    return true;
}

}  // namespace stridex::python
