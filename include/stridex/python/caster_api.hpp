// The caster API: a versioned table of C functions that the stridex wheel's `_stridex` module
// exports for the nanobind and pybind11 casters (caster_core.hpp), so that an argument becomes a
// C++ View in the extension without a Python stridex.View being made and exported again.
//
// The extension and the wheel may be built by different compilers and stridex versions, so only C
// crosses: a PyObject*, integers, C function pointers, DLPack structs (layout-checked in dlpack.hpp)
// and StridexArray (layout-checked below). The table is a
// PyCapsule named kCasterApiCapsule, the attribute `_caster_api` of `stridex._stridex`; the struct
// is static in the wheel and outlives every caller.
//
// Versioning: `major` and `size` are frozen at the start of the struct. A consumer uses the table
// only when `major` is its own, and calls a slot only when `size` covers it (the casters take
// import_array where the table has it, else import_tensor); a table too small for import_tensor and
// view_from_tensor leaves them on the Python path (stridex.view and the DLPack exchange API).
// Slots are only ever added at the end, raising `minor` and `size`; a change to an existing slot
// (or to a struct it fills) raises `major`.
//
// Every slot is called with the GIL held, never throws, and returns 0, or -1 with a Python
// exception set.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>

#include "stridex/dlpack.hpp"

namespace stridex::python {

inline constexpr char kCasterApiCapsule[] = "stridex._stridex._caster_api";
inline constexpr std::uint32_t kCasterApiMajor = 1;
inline constexpr std::uint32_t kCasterApiMinor = 2;

// Flags of import_tensor and import_array.
// Since minor 2: order the data on the calling framework's current stream (arg::caller_stream):
// the stream the DLPack exchange API of obj's type names for obj's GPU, asked the way stridex.view()
// asks it (the API checked before use, docs/import.md), as if passed as `stream`; the default
// contract where the type has no exchange API or obj is not on a GPU. `stream` must then be NULL
// or None (ValueError otherwise).
inline constexpr std::uint64_t kImportCallerStream = 1;

extern "C" {

// `obj` imported exactly as stridex.view(obj, stream=stream) imports it (every protocol, the same
// stream contract, the same validation and the same exceptions), straight into a DLPack tensor.
// `stream`: NULL or None for the default contract, else anything stridex.view's `stream` takes.
// `flags`: 0, or kImportCallerStream from minor 2 (others raise ValueError).
// 0: *out is a new tensor owned by the caller, who runs its deleter exactly once; the tensor keeps
// obj's memory alive (not obj itself). *ready is the stream the data is ready on, as
// stridex.View.stream says it (-1: nothing pending, host memory). -1: Python exception set, *out
// is NULL. An array whose elements DLPack cannot describe (opaque structured elements) raises
// BufferError, as the exchange API does.
typedef int (*StridexImportTensor)(PyObject* obj, PyObject* stream, std::uint64_t flags,
                                   dlpack::DLManagedTensorVersioned** out, std::intptr_t* ready);

// A new stridex.View that owns `tensor`, ready on `stream` (-1: nothing pending, 1 legacy, 2
// per-thread default stream, else a CUstream handle; 0 and values below -1 raise ValueError).
// Steals `tensor` in every outcome: on failure its deleter has run. 0: *out is a new reference.
typedef int (*StridexViewFromTensor)(dlpack::DLManagedTensorVersioned* tensor, std::intptr_t stream, PyObject** out);

// What import_array fills: one imported array, described in DLPack's terms, and what keeps it
// alive. The caller sets `dims` and `max_ndim`; the slot sets the rest.
struct StridexArray {
    std::int64_t* dims;     // (caller) room for 2 * max_ndim values: the slot writes shape, then strides
    std::int32_t max_ndim;  // (caller) the most axes the caller takes
    std::int32_t reserved;  // 0
    // shape and strides point into dims, strides in elements; data addresses element 0
    // (byte_offset 0); dtype and device are DLPack's.
    dlpack::DLTensor tensor;
    std::uint64_t flags;   // DLPack's: kFlagReadOnly, kFlagIsSubbyteTypePadded
    std::intptr_t stream;  // the stream the data is ready on, as import_tensor's *ready
    // The keep-alive: release(context) exactly once, on any thread, when the caller is done with
    // the memory. NULL: the memory needs nothing kept alive.
    void (*release)(void* context) noexcept;
    void* context;
};

// Since minor 1. `obj` imported exactly as import_tensor imports it (the same protocols, stream
// contract, validation and exceptions), described in `out` without a DLPack tensor being made: the
// caster builds its View from it, owning `release`. `flags`: 0 (others raise ValueError).
// The description holds what a stridex::View holds (docs/extensions.md, "How an argument
// crosses"): 0 <= ndim <= max_ndim; every extent >= 0; the element count, the element span and the
// byte span fit in int64 and do not leave the address space; data is not NULL unless an extent is
// 0; the dtype is a scalar DLPack dtype (lanes 1, or one byte of packed sub-byte lanes; opaque
// elements raise BufferError, as import_tensor); packed sub-byte data is C-contiguous. Callers
// rely on this and build their View without checking it again (they check only what their own
// stridex may know differently: the dtype and the device), so a wheel that cannot promise it must
// not fill the struct. An array of more than max_ndim axes raises BufferError.
// 0: the fields are set and the caller owns `release`. -1: Python exception set, out->release is
// NULL (nothing to release); ValueError for a NULL obj or out, NULL dims with max_ndim > 0, a
// negative max_ndim or unknown flags.
typedef int (*StridexImportArray)(PyObject* obj, PyObject* stream, std::uint64_t flags, StridexArray* out);

}  // extern "C"

struct CasterApi {
    std::uint32_t major;  // frozen
    std::uint32_t minor;
    std::uint64_t size;  // frozen: sizeof(CasterApi) as the wheel was built
    StridexImportTensor import_tensor;
    StridexViewFromTensor view_from_tensor;
    StridexImportArray import_array;  // minor >= 1
};

// The size of a minor-0 table: import_tensor and view_from_tensor, no more.
inline constexpr std::uint64_t kCasterApiSizeMinor0 = 32;

static_assert(offsetof(CasterApi, size) == 8 && offsetof(CasterApi, import_tensor) == 16);
static_assert(offsetof(CasterApi, import_array) == kCasterApiSizeMinor0 && sizeof(CasterApi) == 40);
static_assert(offsetof(StridexArray, max_ndim) == 8 && offsetof(StridexArray, tensor) == 16);
static_assert(offsetof(StridexArray, flags) == 64 && offsetof(StridexArray, stream) == 72);
static_assert(offsetof(StridexArray, release) == 80 && sizeof(StridexArray) == 96);

}  // namespace stridex::python
