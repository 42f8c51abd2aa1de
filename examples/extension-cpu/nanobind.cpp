// The CPU example bound with nanobind: `import stridex_example_cpu_nb`.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <stridex/python/nanobind.hpp>

#include "ops.hpp"

namespace nb = nanobind;

NB_MODULE(stridex_example_cpu_nb, m) {
    m.def("fill", &example::fill, nb::arg("x"), nb::arg("value"));
    m.def("row_sums", &example::row_sums, nb::arg("m"));
    m.def("c_total", &example::c_total, nb::arg("m"));
    m.def("f_total", &example::f_total, nb::arg("m"));
    m.def("as_c_contiguous", &example::as_c_contiguous, nb::arg("m"));
    m.def("scaled", &example::scaled, nb::arg("x"), nb::arg("a"));
    m.def("cuda0_size", &example::cuda0_size, nb::arg("x"));
    m.def("info", &example::info, nb::arg("v"));
    m.def("info_strict", &example::info, nb::arg("v").noconvert());
}
