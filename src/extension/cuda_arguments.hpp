// Python arguments of the CUDA bindings (bind_cuda.cpp defines them; bind_device_ptr.cpp and
// bind_virtual_buffer.cpp use them): addresses, ordinals, devices, dtypes and shapes, each checked
// and converted in one place. Failures are stridex::Error (TypeError/ValueError in Python).
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stridex/device.hpp"
#include "stridex/dtype.hpp"

namespace stridex::python {

// The Python type name of `h`'s type, for messages.
std::string name_of_type(nanobind::handle h);

// The Python int behind `h`, or an empty object when `h` is no integer. `allow_int_protocol`
// also accepts objects with only __int__: cuda.bindings' CUdeviceptr has __int__ but no
// __index__. Floats have __int__ too and are refused: an address is never a float.
nanobind::object as_python_int(nanobind::handle h, bool allow_int_protocol);

// An int as a 64-bit address; ValueError outside [0, 2^64).
std::uint64_t to_address(nanobind::handle i);

// An address from a DevicePtr, an int, or anything with __index__ or __int__.
std::uint64_t address_of(nanobind::handle h);

// An int that must fit in 32 bits (`what` names it in the ValueError).
std::int32_t to_int32(nanobind::handle i, const char* what);

// A non-negative int64 as a size.
std::size_t to_size(std::int64_t v, const char* what);

// A CUDA ordinal from an int, a stridex.Device ("cuda:N") or a string naming one.
int cuda_ordinal(nanobind::handle h);

// A stridex Device for DevicePtr(..., device=...): any device; an int is a CUDA ordinal.
Device device_arg(nanobind::handle h);

// A Dtype from a stridex.Dtype, a name ("float32"), a torch dtype (str "torch.float32"), or
// anything numpy.dtype() takes (np.float32, np.dtype("f4"), "<f4").
Dtype dtype_arg(nanobind::handle h);

// A shape from an int or a sequence of ints (each fitting in 64 bits).
std::vector<std::int64_t> shape_arg(nanobind::handle h);

}  // namespace stridex::python
