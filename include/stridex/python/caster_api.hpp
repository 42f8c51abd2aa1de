// The caster API: a versioned table of C functions that the stridex wheel's `_stridex` module
// exports for the nanobind and pybind11 casters (caster_core.hpp), so that an argument becomes a
// C++ View in the extension without a Python stridex.View being made and exported again.
//
// The extension and the wheel may be built by different compilers and stridex versions, so only C
// crosses: a PyObject*, integers and DLPack structs (layout-checked in dlpack.hpp). The table is a
// PyCapsule named kCasterApiCapsule, the attribute `_caster_api` of `stridex._stridex`; the struct
// is static in the wheel and outlives every caller.
//
// Versioning: `major` and `size` are frozen at the start of the struct. A consumer uses the table
// only when `major` is its own and `size` covers every slot it calls; otherwise it keeps to the
// Python path (stridex.view and the DLPack exchange API). Slots are only ever added at the end,
// raising `minor` and `size`; a change to an existing slot raises `major`.
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
inline constexpr std::uint32_t kCasterApiMinor = 0;

extern "C" {

// `obj` imported exactly as stridex.view(obj, stream=stream) imports it (every protocol, the same
// stream contract, the same validation and the same exceptions), straight into a DLPack tensor.
// `stream`: NULL or None for the default contract, else anything stridex.view's `stream` takes.
// `flags`: 0 (no flag is defined yet; others raise ValueError).
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
typedef int (*StridexViewFromTensor)(dlpack::DLManagedTensorVersioned* tensor, std::intptr_t stream,
                                     PyObject** out);

}  // extern "C"

struct CasterApi {
    std::uint32_t major;  // frozen
    std::uint32_t minor;
    std::uint64_t size;   // frozen: sizeof(CasterApi) as the wheel was built
    StridexImportTensor import_tensor;
    StridexViewFromTensor view_from_tensor;
};

static_assert(offsetof(CasterApi, size) == 8 && offsetof(CasterApi, import_tensor) == 16);
static_assert(sizeof(CasterApi) == 32);

}  // namespace stridex::python
