// Owners of Python objects (py_owner.hpp): a reference released with the GIL, never after finalization.
#include "export/py_owner.hpp"

namespace nb = nanobind;

namespace stridex::python {

namespace {
// Runs f with the GIL held, taking it only when this thread does not hold it already: a View is
// most often dropped by Python code, and PyGILState_Ensure/Release cost two thread-local lookups
// each. From Python 3.12 the current thread state is per thread and NULL while this thread has
// released the GIL, so it answers cheaply; before 3.12 it is one global (the GIL holder's, whoever
// that is), which says nothing about this thread, so the GIL is always taken there.
template <class F>
void with_gil(F&& f) noexcept {
#if PY_VERSION_HEX >= 0x030D0000
    if (PyThreadState_GetUnchecked() != nullptr) return f();
#elif PY_VERSION_HEX >= 0x030C0000
    if (_PyThreadState_UncheckedGet() != nullptr) return f();
#endif
    PyGILState_STATE gil = PyGILState_Ensure();
    f();
    PyGILState_Release(gil);
}

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

nb::object wrap_view(View view, nb::object source, nb::object element) {
    return nb::cast(PyView{std::move(view), std::move(source), std::move(element)}, nb::rv_policy::move);
}

}  // namespace stridex::python
