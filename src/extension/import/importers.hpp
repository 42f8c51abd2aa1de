// The importers of stridex.view(), one per protocol, and what they share: each is called by the
// entry point (import.cpp) in its order of protocols, and the per-type cache (import_type_cache.cpp)
// asks them once per type whether it may take their shortcut. They read a type's entry
// (type_entry.hpp) and call neither the entry point nor the cache.
//
// import_dlpack.cpp        the DLPack C exchange API, __dlpack__ and raw capsules
// import_numpy.cpp         numpy.ndarray read from its struct (the fast path before __dlpack__)
// import_cupy.cpp          cupy.ndarray read through CuPy's C API or its stable layout (likewise)
// import_jax.cpp           JAX arrays through jaxlib's export function
// import_interfaces.cpp    __cuda_array_interface__, __array_interface__ and the buffer protocol
//
// Everything here runs with the GIL held. Errors are stridex::Error (mapped by bind_errors.cpp) or
// nb::python_error (a producer's own exception, passed through unchanged).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "common/attributes.hpp"
#include "common/names.hpp"
#include "import/type_entry.hpp"
#include "stream/producers.hpp"
#include "stream/stream_policy.hpp"
#include "stridex/dlpack.hpp"
#include "stridex/error.hpp"
#include "stridex/view.hpp"

namespace stridex::python {

// Each importer returns the View (still without its stream) as a prvalue, so that it is built
// once, in place, inside the Python object (a View move copies ~200 bytes), and sets `ready` to the
// stream the data is ready on as the producer left it (kNoStream: nothing promised). Each throws
// nb::python_error or stridex::Error on failure; the caller decides whether a BufferError means
// "try the next protocol".

// A refusal that ends the import instead of moving on to the next protocol: the producer's other
// protocols would hand over the same array without the check (torch's __cuda_array_interface__
// exports a conjugate view as plain memory). A BufferError to the caller, like any Error(buffer).
struct FinalRefusal : Error {
    explicit FinalRefusal(std::string message) : Error(ErrorKind::buffer, std::move(message)) {}
};

// ---- import_dlpack.cpp ----
// stridex.ConsumedCapsuleError: a capsule imported a second time. A BufferError (stridex's refusal
// of this array), a ValueError (what CuPy raises) and a RuntimeError (what torch raises): code
// written against any framework's from_dlpack catches it with a View in the middle.
void bind_consumed_capsule_error(nanobind::module_& m);
View import_exchange(PyObject* obj, const TypeEntry& entry, std::intptr_t& ready);
View import_dlpack_method(PyObject* obj, TypeEntry& entry, const StreamRequest& request, std::intptr_t& ready);
// A capsule from __dlpack__ (raw = false) or passed by the caller (raw = true): consumed (renamed
// "used_dltensor[_versioned]") and imported; the deleter runs exactly once on every path.
// `immutable`: the producer's arrays are immutable by contract (its row says so), so the view is
// read-only whatever the capsule says (Writability::immutable unless the capsule says read-only).
View consume_capsule(PyObject* capsule, bool raw, bool immutable = false);
// The exchange API a type offers (1.3 capsule preferred over the 1.2 int), walking prev_api to
// major 1; nullptr if none, or if what the type points at is not readable, loops, or has its
// functions outside executable code (docs/import.md). `holder` receives a strong reference to
// keep it alive; `declined` (where given) the reason, in static words, where the type offers an
// API that is not used, nullptr otherwise: stridex.view()'s error says it. Throws only what a
// metaclass raises that is not an Exception.
const dlpack::DLPackExchangeAPI* exchange_api_of(PyTypeObject* type, PyObject** holder,
                                                 const char** declined = nullptr);
// Whether the entry's exchange API lends its tensors (the shortcut torch_borrowed).
bool borrows_exchange_tensors(const TypeEntry& entry) noexcept;

// The calling framework's current stream for obj's GPU, as a request to import on (what the
// casters' arg::caller_stream asks): the stream the exchange API of obj's type names for the
// device __dlpack_device__ reports; the default request where the type has no exchange API or obj
// is not on a GPU. (import_dlpack.cpp, for a probed entry; import.hpp's, for an object.)
StreamRequest caller_stream_request(PyObject* obj, const TypeEntry& entry);

// ---- import_numpy.cpp, import_cupy.cpp: arrays read from their struct ----
// Which struct instances of `type` are read from (its quirk-table row, and the __dlpack__ found on
// it, may allow one); the type cache asks once per type (import_type_cache.cpp).
ArrayStruct readable_array_struct(PyTypeObject* type, const ProducerRow& row, PyObject* dlpack) noexcept;
bool numpy_struct_readable(PyTypeObject* type, const ProducerRow& row) noexcept;
bool cupy_struct_readable(PyTypeObject* type, const ProducerRow& row, PyObject* dlpack) noexcept;
// Each builds at `at` the View __dlpack__ would give and returns true; false (nothing built, no
// error) where __dlpack__ must decide. They throw only what building that View would throw on
// either path, or what the producer's own C API raises. CuPy's sets `ready` as import_exchange does.
bool import_numpy_struct(PyObject* obj, View* at);
bool import_cupy_struct(PyObject* obj, View* at, std::intptr_t& ready);
// Which of CuPy's two shortcuts the last probe of cupy.ndarray that found one took.
Shortcut cupy_struct_shortcut() noexcept;
// The Dtype of a numpy.dtype object (`descr`), where DLPack has a code for it and its data are in
// native byte order; false otherwise.
bool numpy_dtype_of(PyObject* descr, Dtype* out) noexcept;
// CuPy's current stream for the GPU of a cupy.ndarray (a type readable by cupy_struct_readable),
// as a request to import on (arg::caller_stream); the default request if the array says no device.
StreamRequest cupy_caller_stream(PyObject* obj);

// ---- import_jax.cpp: JAX arrays through jaxlib's export function ----
// Whether instances of `type` may take the shortcut (its row allows one, the type is jaxlib's
// ArrayImpl and `dlpack`, the __dlpack__ found on it, is JAX's own); the type cache asks once per type.
bool jaxlib_export_usable(PyTypeObject* type, const ProducerRow& row, PyObject* dlpack) noexcept;
// The capsule obj.__dlpack__(stream=stream) would return (a new reference), made without its Python
// layers; nullptr (no error set) where __dlpack__ must answer itself. Throws only what is not an
// Exception (KeyboardInterrupt and the like).
PyObject* export_through_jaxlib(PyObject* obj, PyObject* stream);

// ---- import_interfaces.cpp ----
// `interface` is the object's __cuda_array_interface__ / __array_interface__ value. Void and
// structured elements import as Dtype::opaque_bytes of their itemsize, and `element` receives the
// producer's own description of them (PyView::element); it is left alone for other dtypes.
View import_cai(PyObject* obj, PyObject* interface, std::intptr_t& ready, nanobind::object* element);
View import_array_interface(PyObject* obj, PyObject* interface, nanobind::object* element);
View import_buffer(PyObject* obj, nanobind::object* element);

}  // namespace stridex::python
