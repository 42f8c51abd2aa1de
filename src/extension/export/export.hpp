// Export of stridex.View to other frameworks: the pieces export.cpp, export_buffer.cpp,
// exchange_api.cpp and bind/bind_from_pointer.cpp share. The rules themselves are in docs/export.md.
#pragma once

#include <nanobind/nanobind.h>

#include "common/set_error.hpp"
#include "export/py_owner.hpp"
#include "stridex/dlpack.hpp"
#include "stridex/view.hpp"

namespace stridex::python {

// The stridex.View type object: the one home of it, set by bind_view (bind/bind_view.cpp) when it binds the
// class. Inline: stridex.view() compares every argument's type with it.
extern PyTypeObject* g_view_type;
inline PyTypeObject* view_type() noexcept { return g_view_type; }
// A checked access to a stridex.View's View.
inline bool is_view(PyObject* o) noexcept { return PyObject_TypeCheck(o, view_type()) != 0; }
// `stridex.View.__new__(stridex.View)` (or a subclass's) makes an object with no View in it, and
// nanobind reuses pooled memory for it: every raw entry point reaches the View through here.
[[noreturn]] void fail_uninitialized(PyObject* o);
inline PyView& py_view(PyObject* o) {
    if (!nanobind::inst_ready(o)) [[unlikely]]
        fail_uninitialized(o);
    return *nanobind::inst_ptr<PyView>(o);
}

// A DLPack capsule ("dltensor_versioned" or "dltensor") around a fresh export of `view`. The
// capsule's destructor runs the deleter only if no consumer renamed it to used_*, and keeps any
// pending Python exception. New reference; Error / bad_alloc on failure, nothing leaked.
PyObject* dlpack_capsule(const View& view, bool versioned, std::uint64_t extra_flags);

// Host memory with pending CUDA work (pinned or managed memory a kernel still writes): blocks the
// host until `view.stream()` and its Pending (an IPC event) are done. The one host-blocking sync of export, for host consumers
// (buffer protocol, array interface, a host copy), which no event can order. No-op otherwise.
void host_sync(const View& view);

// The producer's description of an opaque element (PyView::element): its `key` ("typestr", "descr"
// or "format"), or nullptr when it gave none. Borrowed: alive as long as the View.
PyObject* element_description(const PyView& view, const char* key) noexcept;

// Opaque elements (void, structured dtypes) have no DLPack dtype: Error(buffer) saying so.
void require_dlpack_dtype(const View& view);

// export_buffer.cpp: the buffer protocol's slots of the View class (bind/bind_view.cpp).
int view_getbuffer(PyObject* self, Py_buffer* b, int flags) noexcept;
void view_releasebuffer(PyObject* self, Py_buffer* b) noexcept;

// exchange_api.cpp: __dlpack_c_exchange_api__ (1.3 capsule) and __c_dlpack_exchange_api__ (1.2 int)
// on the View type.
void bind_exchange_api(nanobind::handle view_type);

}  // namespace stridex::python
