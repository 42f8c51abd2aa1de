// The XLA FFI door: the example's functions as XLA handlers for jax.jit (include/stridex/xla/ffi.hpp),
// from the same C++ functions the nanobind and pybind11 modules bind (ops.hpp). Each module exports
// them as the dict `xla` (name -> capsule "stridex.xla_target"), which stridex.jax.ffi_function
// registers with JAX. Built where the XLA FFI headers are found (jax installed); no Python here.
#pragma once

#include <utility>

#include <stridex/xla/ffi.hpp>

#include "ops.hpp"

namespace example {

using stridex::xla_ffi::Host;

// One name per parameter: the names of the attributes (value) and of the parameters in errors.
inline constexpr std::pair<const char*, const StridexXlaTarget*> xla_targets[] = {
    {"fill", &Host<&fill, "x", "value">::target},    {"row_sums_into", &Host<&row_sums_into, "m", "sums">::target},
    {"c_total", &Host<&c_total, "m">::target},       {"f_total", &Host<&f_total, "m">::target},
    {"cuda0_size", &Host<&cuda0_size, "x">::target}, {"address_of", &Host<&address_of, "v">::target},
};

}  // namespace example
