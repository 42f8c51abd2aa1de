// What a Python type offers to stridex.view(), found once per type (the per-type cache,
// import_type_cache.hpp, keeps one per type; the importers read it). A header of its own, below both,
// so that the cache may ask the importers about a type and the importers read its entry without a
// circle between them.
#pragma once

#include <Python.h>

#include "stream/producers.hpp"
#include "stridex/dlpack.hpp"

namespace stridex::python {

// What a Python type offers, found once per type.
struct TypeEntry {
    PyTypeObject* type = nullptr;  // strong reference while cached
    unsigned int version_tag = 0;  // the type's tp_version_tag when probed
    const dlpack::DLPackExchangeAPI* exchange = nullptr;
    PyObject* exchange_holder = nullptr;  // the capsule or int the API came from (strong)
    PyObject* dlpack = nullptr;           // __dlpack__ as found on the type (strong)
    PyObject* dlpack_device = nullptr;    // __dlpack_device__ as found on the type (strong)
    bool dlpack_unbound = false;          // a plain method: call it with self first, no binding
    bool dlpack_device_unbound = false;
    bool cai_on_type = false;     // __cuda_array_interface__ defined on the type
    bool ai_on_type = false;      // __array_interface__ defined on the type
    bool instance_attrs = false;  // instances have a __dict__: interfaces may live there
    bool buffer = false;          // tp_as_buffer->bf_getbuffer
    // The framework shortcuts (shortcuts.hpp) the type takes, decided here under the switch:
    ArrayStruct array_struct = ArrayStruct::none;    // read from the array's struct (import_numpy.cpp,
                                                     // import_cupy.cpp) before anything else is tried
    bool jaxlib_export = false;                      // __dlpack__'s capsule from jaxlib directly (import_jax.cpp)
    getter requires_grad_get = nullptr;              // the type's requires_grad getset, called directly where the
    void* requires_grad_closure = nullptr;           // row refuses what __dlpack__ refuses (torch_getter)
    DlpackKeywords keywords = DlpackKeywords::full;  // from the row, lowered by a TypeError retry
    const ProducerRow* row = nullptr;
};

}  // namespace stridex::python
