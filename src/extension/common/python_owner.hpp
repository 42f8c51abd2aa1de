// Owners of Python objects: a reference or a Py_buffer released with the GIL, never after
// finalization. Below every room that keeps a producer's object alive (the hand-over keeps stream
// objects too).
#pragma once

#include <nanobind/nanobind.h>

#include "common/python_compat.hpp"
#include "stridex/owner.hpp"

namespace stridex::python {

// An Owner holding a strong reference to `object`. Its release may run on any thread, without the
// GIL (DLPack deleters do): it takes the GIL to drop the reference, and leaks it instead when the
// interpreter is finalizing, where taking the GIL would hang or crash.
Owner owner_of(nanobind::handle object);

// An Owner that releases a filled heap Py_buffer (with the GIL) and deletes it; if making the
// Owner fails, the buffer is released at once. *out receives the buffer on success.
Owner adopt_buffer(Py_buffer* buffer, Py_buffer** out);

// The Python object an Owner made by owner_of or adopt_buffer references (borrowed), or nullptr
// for any other owner. For the View type's garbage-collector support.
PyObject* python_object_of(const Owner& owner) noexcept;

}  // namespace stridex::python
