// One mapping from stridex::Error kinds to Python exceptions (docs/core.md, "Errors").
#include "bindings.hpp"
#include "stridex/error.hpp"

namespace stridex::python {

PyObject* python_exception_for(ErrorKind kind) noexcept {
    switch (kind) {
        case ErrorKind::buffer:
        case ErrorKind::unsupported: return PyExc_BufferError;
        case ErrorKind::type: return PyExc_TypeError;
        case ErrorKind::value: return PyExc_ValueError;
        case ErrorKind::index: return PyExc_IndexError;
        case ErrorKind::cuda: return PyExc_RuntimeError;
    }
    return PyExc_RuntimeError;
}

void bind_errors(nanobind::module_&) {
    nanobind::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const Error& e) {
            PyErr_SetString(python_exception_for(e.kind()), e.what());
        }
    });
}

}  // namespace stridex::python
