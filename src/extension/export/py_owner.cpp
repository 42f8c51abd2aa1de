// The Python face of a View (py_owner.hpp).
#include "export/py_owner.hpp"

namespace nb = nanobind;

namespace stridex::python {

nb::object wrap_view(View view, nb::object source, nb::object element) {
    return nb::cast(PyView{std::move(view), std::move(source), std::move(element)}, nb::rv_policy::move);
}

}  // namespace stridex::python
