// The CUDA example bound with nanobind: `import stridex_example_cuda_nb`.
#include <nanobind/nanobind.h>

#include <stridex/python/nanobind.hpp>

#include "like.hpp"
#include "ops.hpp"
#ifdef STRIDEX_EXAMPLE_XLA
#include "xla.hpp"
#endif

namespace nb = nanobind;

NB_MODULE(stridex_example_cuda_nb, m) {
    stridex::register_error_translator();  // stridex::Error -> ValueError, BufferError ...
    m.def("saxpy", &example::saxpy, nb::arg("a"), nb::arg("x"), nb::arg("y"), "y = a * x + y, in place (1-d)");
    m.def("saxpy_2d", &example::saxpy_2d, nb::arg("a"), nb::arg("x"), nb::arg("y"), "y = a * x + y, in place (2-d)");
    m.def("arange", &example::arange, nb::arg("n"), nb::arg("device") = 0);
    m.def("arange_like", &example::arange_like, nb::arg("like"), nb::arg("n"));
    m.def("arange_into", &example::arange_into, nb::arg("out"));
    m.def("stream_of", &example::stream_of, nb::arg("x"));
#ifdef STRIDEX_EXAMPLE_XLA
    // The XLA door: name -> the handler and its signature, for stridex.jax.ffi_function.
    nb::dict xla;
    for (const auto& [name, target] : example::xla_targets)
        xla[name] = nb::capsule(target, stridex::xla_ffi::kTargetCapsule);
    m.attr("xla") = xla;
#endif
}
