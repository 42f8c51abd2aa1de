// Owners of Python objects (python_owner.hpp): a reference released with the GIL, never after finalization.
#include "common/python_owner.hpp"

namespace nb = nanobind;

namespace stridex::python {

namespace {
void release_reference(void* object) noexcept {
    if (interpreter_finalizing()) return;  // deliberately leaked: see owner_of
    with_gil([object] { Py_DECREF(static_cast<PyObject*>(object)); });
}
void release_buffer(void* p) noexcept {
    auto* buffer = static_cast<Py_buffer*>(p);
    if (interpreter_finalizing()) return;  // leaked deliberately: no GIL to take any more
    with_gil([buffer] { PyBuffer_Release(buffer); });
    delete buffer;
}

}  // namespace

Owner adopt_buffer(Py_buffer* buffer, Py_buffer** out) {
    try {
        Owner owner = Owner::from_callback(&release_buffer, buffer);
        *out = buffer;
        return owner;
    } catch (...) {
        PyBuffer_Release(buffer);
        delete buffer;
        throw;
    }
}

PyObject* python_object_of(const Owner& owner) noexcept {
    if (void* object = owner.callback_context(&release_reference)) return static_cast<PyObject*>(object);
    if (void* buffer = owner.callback_context(&release_buffer)) return static_cast<Py_buffer*>(buffer)->obj;
    return nullptr;
}

Owner owner_of(nb::handle object) {
    Owner owner = Owner::from_callback(&release_reference, object.ptr());
    Py_INCREF(object.ptr());  // after the allocation, so a failed allocation leaks nothing
    return owner;
}

}  // namespace stridex::python
