// The CPU example bound with nanobind: `import stridex_example_cpu_nb`.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <stridex/python/nanobind.hpp>

#include "like.hpp"
#include "ops.hpp"
#ifdef STRIDEX_EXAMPLE_XLA
#include "xla.hpp"
#endif

namespace nb = nanobind;

NB_MODULE(stridex_example_cpu_nb, m) {
    stridex::register_error_translator();  // stridex::Error -> ValueError, BufferError ...
    m.def("fill", &example::fill, nb::arg("x"), nb::arg("value"));
    m.def("row_sums", &example::row_sums, nb::arg("m"));
    m.def("row_sums_into", &example::row_sums_into, nb::arg("m"), nb::arg("sums"));
    m.def("c_total", &example::c_total, nb::arg("m"));
    m.def("f_total", &example::f_total, nb::arg("m"));
    m.def("as_c_contiguous", &example::as_c_contiguous, nb::arg("m"));
    m.def("scaled", &example::scaled, nb::arg("x"), nb::arg("a"));
    m.def("cuda0_size", &example::cuda0_size, nb::arg("x"));
    m.def("address_of", &example::address_of, nb::arg("v"));
    m.def("info", &example::info, nb::arg("v"));
    m.def("info_strict", &example::info, nb::arg("v").noconvert());
#ifdef STRIDEX_EXAMPLE_XLA
    // The XLA door: name -> the handler and its signature, for stridex.jax.ffi_function.
    nb::dict xla;
    for (const auto& [name, target] : example::xla_targets)
        xla[name] = nb::capsule(target, stridex::xla_ffi::kTargetCapsule);
    m.attr("xla") = xla;
#endif
}
