// stridex.view(obj, *, stream=...): the entry point (import.cpp), for the module and the casters.
//
// import.cpp               the entry point and the order of the protocols; the hand-over of an import
// importers.hpp            the importers, one per protocol (import_dlpack.cpp, import_numpy.cpp ...)
// import_type_cache.*      the per-type cache: what each type offers (type_entry.hpp), probed once
// bind_shortcuts.cpp       the framework shortcuts' switch (a change empties the type cache)
#pragma once

#include <Python.h>

#include "stream/stream_policy.hpp"
#include "stridex/view.hpp"

namespace stridex::python {

// The calling framework's current stream for obj's GPU, as a request to import on (what the
// casters' arg::caller_stream asks): the stream the exchange API of obj's type names for the
// device __dlpack_device__ reports, or CuPy's for a cupy.ndarray; the default request where the
// type has none or obj is not on a GPU.
StreamRequest caller_stream_request(PyObject* obj);

// The whole import: a new stridex.View object (a new reference).
PyObject* import_object(PyObject* obj, const StreamRequest& request);
// The same import without the Python object, for the caster API (caster_api.cpp): the View is
// constructed at `storage` (raw memory; the caller destroys it) only if the import succeeds.
void import_view_into(PyObject* obj, const StreamRequest& request, View* storage);

}  // namespace stridex::python
