// No-op functions taking one float32 vector on the CPU (or on a CUDA device), nanobind side:
// the stridex caster and nb::ndarray with the same constraints; and the caster's return path.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <stridex/python/nanobind.hpp>

namespace nb = nanobind;
using namespace stridex;

NB_MODULE(casters_nb, m) {
    m.def(
        "stridex_cpu", [](Arg<arg::dtype<float>, arg::ndim<1>, arg::cpu>) {}, nb::arg("a"));
    m.def(
        "stridex_cuda", [](Arg<arg::dtype<float>, arg::ndim<1>, arg::cuda>) {}, nb::arg("a"));
    m.def(
        "ndarray_cpu", [](nb::ndarray<float, nb::ndim<1>, nb::device::cpu>) {}, nb::arg("a"));
    m.def(
        "ndarray_cuda", [](nb::ndarray<float, nb::ndim<1>, nb::device::cuda>) {}, nb::arg("a"));
    // The argument back as a new stridex.View (the return path: to_stridex_view).
    m.def(
        "stridex_return", [](const View& a) { return a; }, nb::arg("a"));
    // True: the casters ignore the wheel's caster API and take the Python path (stridex.view(), then
    // the exchange API), the only path before the caster API existed; False: back to the API.
    m.def("python_path", [](bool on) {
        static const python::CasterApi* const api = interop::link()->caster_api;
        interop::link()->caster_api = on ? nullptr : api;
    });
}
