// The CUDA example bound with pybind11: `import stridex_example_cuda_pb`.
#include <pybind11/pybind11.h>

#include <stridex/python/pybind11.hpp>

#include "like.hpp"
#include "ops.hpp"
#ifdef STRIDEX_EXAMPLE_XLA
#include "xla.hpp"
#endif

namespace py = pybind11;

PYBIND11_MODULE(stridex_example_cuda_pb, m) {
    stridex::register_error_translator();  // stridex::Error -> ValueError, BufferError ...
    m.def("saxpy", &example::saxpy, py::arg("a"), py::arg("x"), py::arg("y"), "y = a * x + y, in place (1-d)");
    m.def("saxpy_2d", &example::saxpy_2d, py::arg("a"), py::arg("x"), py::arg("y"), "y = a * x + y, in place (2-d)");
    m.def("arange", &example::arange, py::arg("n"), py::arg("device") = 0);
    m.def("arange_like", &example::arange_like, py::arg("like"), py::arg("n"));
    m.def("arange_into", &example::arange_into, py::arg("out"));
    m.def("stream_of", &example::stream_of, py::arg("x"));
#ifdef STRIDEX_EXAMPLE_XLA
    // The XLA door: name -> the handler and its signature, for stridex.jax.ffi_function.
    py::dict xla;
    for (const auto& [name, target] : example::xla_targets)
        xla[name] = py::capsule(target, stridex::xla_ffi::kTargetCapsule);
    m.attr("xla") = xla;
#endif
}
