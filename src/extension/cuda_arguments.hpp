// Python arguments of the CUDA bindings (bind_cuda.cpp defines them; bind_device_ptr.cpp and
// bind_virtual_buffer.cpp use them): DevicePtr operands, sizes, ordinals and devices. Addresses,
// dtypes, shapes and every other integer are arguments.hpp's, the one home of Python arguments. Failures are stridex::Error (TypeError/ValueError in Python).
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stridex/device.hpp"
#include "stridex/dtype.hpp"

namespace stridex::python {

// The Python int behind an operand of DevicePtr arithmetic and comparisons, or an empty object
// when `h` is no integer (floats included: Python then answers NotImplemented's TypeError).
// Addresses, dtypes and shapes are arguments.hpp's.
nanobind::object as_python_int(nanobind::handle h);

// A non-negative int64 as a size.
std::size_t to_size(std::int64_t v, const char* what);

// A CUDA ordinal from an int, a stridex.Device ("cuda:N") or a string naming one.
int cuda_ordinal(nanobind::handle h);

// A stridex Device for DevicePtr(..., device=...): any device; an int is a CUDA ordinal.
Device device_arg(nanobind::handle h);

}  // namespace stridex::python
