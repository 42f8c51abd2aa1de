// No-op functions taking one float32 vector, pybind11 side: the stridex caster, and py::array_t
// (NumPy's own arrays only: pybind11 has no DLPack or CUDA array support).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stridex/python/pybind11.hpp>

namespace py = pybind11;
using namespace stridex;

PYBIND11_MODULE(casters_pb, m) {
    m.def(
        "stridex_cpu", [](Arg<arg::dtype<float>, arg::ndim<1>, arg::cpu>) {}, py::arg("a"));
    m.def(
        "stridex_cuda", [](Arg<arg::dtype<float>, arg::ndim<1>, arg::cuda>) {}, py::arg("a"));
    // noconvert: a float32 NumPy array only, never a converted copy.
    m.def(
        "pyarray_cpu",
        [](py::array_t<float, py::array::forcecast> a) {
            if (a.ndim() != 1) throw py::type_error("expected a 1-d array");
        },
        py::arg("a").noconvert());
}
