// No-op functions taking one float32 vector on the CPU (or on a CUDA device), nanobind side:
// the stridex caster and nb::ndarray with the same constraints.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <stridex/python/nanobind.hpp>

namespace nb = nanobind;
using namespace stridex;

NB_MODULE(casters_nb, m) {
    m.def("stridex_cpu", [](Arg<arg::dtype<float>, arg::ndim<1>, arg::cpu>) {}, nb::arg("a"));
    m.def("stridex_cuda", [](Arg<arg::dtype<float>, arg::ndim<1>, arg::cuda>) {}, nb::arg("a"));
    m.def("ndarray_cpu", [](nb::ndarray<float, nb::ndim<1>, nb::device::cpu>) {}, nb::arg("a"));
    m.def("ndarray_cuda", [](nb::ndarray<float, nb::ndim<1>, nb::device::cuda>) {}, nb::arg("a"));
}
