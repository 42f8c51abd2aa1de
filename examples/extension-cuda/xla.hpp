// The XLA FFI door: the example's kernels as XLA handlers for jax.jit on the GPU
// (include/stridex/xla/ffi.hpp), from the same C++ functions the nanobind and pybind11 modules bind
// (ops.hpp). Each module exports them as the dict `xla` (name -> capsule "stridex.xla_target"),
// which stridex.jax.ffi_function registers with JAX. The kernels of caller_stream parameters are
// queued on the stream XLA gives the handler; arange_into's, which has none, on the legacy default
// stream, ordered with XLA's stream by the handler. No Python here.
#pragma once

#include <utility>

#include <stridex/xla/ffi.hpp>

#include "ops.hpp"

namespace example {

using stridex::xla_ffi::Cuda;

inline constexpr std::pair<const char*, const StridexXlaTarget*> xla_targets[] = {
    {"saxpy", &Cuda<&saxpy, "a", "x", "y">::target},
    {"saxpy_2d", &Cuda<&saxpy_2d, "a", "x", "y">::target},
    {"arange_into", &Cuda<&arange_into, "out">::target},
    {"stream_of", &Cuda<&stream_of, "x">::target},
};

}  // namespace example
