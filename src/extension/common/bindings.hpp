// The pieces of the _stridex extension module, each bound by its own file.
#pragma once

#include <nanobind/nanobind.h>

namespace stridex::python {

void bind_errors(nanobind::module_& m);          // bind_errors.cpp: stridex::Error -> Python exceptions
void bind_types(nanobind::module_& m);           // bind_types.cpp: Dtype, Device
void bind_view(nanobind::module_& m);            // bind_view.cpp: the View type, indexing, repr
void bind_shortcuts(nanobind::module_& m);       // bind_shortcuts.cpp: the framework shortcuts and their switch
void bind_import(nanobind::module_& m);          // import.cpp: stridex.view(obj, stream=...)
void bind_internals(nanobind::module_& m);       // bind_internals.cpp: _internals, read-only windows for tests
void bind_caster_api(nanobind::module_& m);      // caster_api.cpp: _caster_api, the casters' C table
void bind_export(nanobind::module_& m);          // export.cpp: __dlpack__, CAI, array interface, buffer
void bind_from_pointer(nanobind::module_& m);    // bind_from_pointer.cpp: stridex.from_pointer
void bind_cuda(nanobind::module_& m);            // bind_cuda.cpp: cuda_available, device_count, pointer_info,
                                                 // and the two below
void bind_device_ptr(nanobind::module_& m);      // bind_device_ptr.cpp: DevicePtr
void bind_virtual_buffer(nanobind::module_& m);  // bind_virtual_buffer.cpp: VirtualBuffer
void bind_ipc(nanobind::module_& m);             // bind_ipc.cpp: CUDA exports and imports for stridex.ipc
void bind_ipc_tickets(nanobind::module_& m);     // bind_ipc_tickets.cpp: the shared ticket words
void bind_memory(nanobind::module_& m);          // allocator.cpp: default allocator, memory_stats, empty_cache
void bind_copy(nanobind::module_& m);            // bind_copy.cpp: stridex.copy, stridex.empty, View.copy/contiguous/to
void bind_sharded(nanobind::module_& m);         // bind_sharded.cpp: sharding plans, their executor, the copy hook

}  // namespace stridex::python
