// nanobind's exception translator: the one mapping of include/stridex/python/errors.hpp.
#include "common/bindings.hpp"
#include "common/set_error.hpp"

namespace stridex::python {

void bind_errors(nanobind::module_&) {
    nanobind::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const Error&) {
            set_python_error_from_current_exception();
        }
    });
}

}  // namespace stridex::python
