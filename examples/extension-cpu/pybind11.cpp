// The CPU example bound with pybind11: `import stridex_example_cpu_pb`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stridex/python/pybind11.hpp>

#include "like.hpp"
#include "ops.hpp"
#ifdef STRIDEX_EXAMPLE_XLA
#include "xla.hpp"
#endif

namespace py = pybind11;

PYBIND11_MODULE(stridex_example_cpu_pb, m) {
    stridex::register_error_translator();  // stridex::Error -> ValueError, BufferError ...
    m.def("fill", &example::fill, py::arg("x"), py::arg("value"));
    m.def("row_sums", &example::row_sums, py::arg("m"));
    m.def("row_sums_into", &example::row_sums_into, py::arg("m"), py::arg("sums"));
    m.def("c_total", &example::c_total, py::arg("m"));
    m.def("f_total", &example::f_total, py::arg("m"));
    m.def("as_c_contiguous", &example::as_c_contiguous, py::arg("m"));
    m.def("scaled", &example::scaled, py::arg("x"), py::arg("a"));
    m.def("cuda0_size", &example::cuda0_size, py::arg("x"));
    m.def("address_of", &example::address_of, py::arg("v"));
    m.def("info", &example::info, py::arg("v"));
    m.def("info_strict", &example::info, py::arg("v").noconvert());
#ifdef STRIDEX_EXAMPLE_XLA
    // The XLA door: name -> the handler and its signature, for stridex.jax.ffi_function.
    py::dict xla;
    for (const auto& [name, target] : example::xla_targets)
        xla[name] = py::capsule(target, stridex::xla_ffi::kTargetCapsule);
    m.attr("xla") = xla;
#endif
}
