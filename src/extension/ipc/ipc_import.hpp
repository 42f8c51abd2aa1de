// A pickled CUDA View made a View again (stridex.ipc): one entry for every kind of CUDA memory.
// The payload is the dict stridex.ipc pickled (python/stridex/ipc/codecs.py names its fields);
// the fields every kind shares are read once, then one small function per kind reads its own.
#pragma once

#include <nanobind/nanobind.h>

#include "sanitizer/handover.hpp"
#include "stridex/cuda/ipc.hpp"
#include "stridex/view.hpp"

namespace stridex::python {

// The kind's name in a payload and on an _IpcExport: "cuda_ipc", "cuda_vmm", "cuda_pool".
const char* ipc_kind_name(cuda::ipc::MemoryKind kind) noexcept;

// _ipc_import(kind, payload, fds, keep): the View of `payload`'s memory, owned by `keep` (may be
// None). `fds` are the file descriptors received for it, in chunk order (the caller closes them).
// A malformed argument is a TypeError or ValueError naming the field, what it expected and what it
// found, raised before any driver call.
nanobind::object ipc_import(nanobind::handle kind, nanobind::handle payload, nanobind::handle fds,
                            nanobind::object keep);

// The sanitizer's record of a View from another process, ready after its producer's event where
// the exporter sent one (`with_event`).
Handover from_process(const View& v, const nanobind::object& keep, bool with_event);

}  // namespace stridex::python
