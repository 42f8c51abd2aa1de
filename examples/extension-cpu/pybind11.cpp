// The CPU example bound with pybind11: `import stridex_example_cpu_pb`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stridex/python/pybind11.hpp>

#include "ops.hpp"

namespace py = pybind11;

PYBIND11_MODULE(stridex_example_cpu_pb, m) {
    m.def("fill", &example::fill, py::arg("x"), py::arg("value"));
    m.def("row_sums", &example::row_sums, py::arg("m"));
    m.def("c_total", &example::c_total, py::arg("m"));
    m.def("f_total", &example::f_total, py::arg("m"));
    m.def("as_c_contiguous", &example::as_c_contiguous, py::arg("m"));
    m.def("scaled", &example::scaled, py::arg("x"), py::arg("a"));
    m.def("cuda0_size", &example::cuda0_size, py::arg("x"));
    m.def("info", &example::info, py::arg("v"));
    m.def("info_strict", &example::info, py::arg("v").noconvert());
}
