// Views of raw pointers whose device comes from the memory itself.
//
// A pointer says nothing about where it points, and a wrong device tag is the worst export bug
// there is: a consumer that takes a GPU allocation for CPU memory dereferences it on the host and
// crashes (nanobind's "GPU arrays returned as CPU arrays"; docs/protocols.md, "The founding bug
// reports"). So stridex never takes the device of raw memory on the caller's word when the driver
// can tell: view_of_pointer asks cuPointerGetAttributes, and a device argument is only a check.
//
// The rules (docs/export.md, "Device truth"):
//   * With a CUDA driver and a GPU: the device is what the driver says (cuda:N for device memory,
//     cuda_host for pinned, cuda_managed for managed, cpu for memory CUDA does not know). A
//     `device` that says otherwise is Error(value) naming both. The one claim the driver cannot
//     judge, a non-CUDA device type (rocm, metal, ...) for memory unknown to CUDA, is taken as given.
//   * Without a driver (or without a GPU) no memory can be CUDA memory: the device defaults to cpu,
//     and a CUDA-family claim is Error(value) -- trusting it would export a host pointer as a device
//     pointer, the same bug mirrored. Other device types are taken as given.
//   * Empty views with a NULL pointer address no memory: their device is the claim (cpu if none).
//   * When the driver knows the allocation's range, the bytes the layout reaches must lie inside it
//     (Error(value) otherwise).
#pragma once

#include <cstdint>
#include <optional>

#include "stridex/view.hpp"

namespace stridex::cuda {

// The device of the memory at `ptr` that a layout spanning bytes [span.lo, span.hi) around it
// reaches, checked against `claimed` by the rules above. Error(cuda) when the driver fails.
Device resolve_device(const void* ptr, Span span, std::optional<Device> claimed);

// A View of `layout` elements of `dtype` whose element 0 is at `ptr`, on the device the memory is
// on (see above). `owner` keeps the memory alive (an empty Owner: the caller guarantees it).
View view_of_pointer(void* ptr, Layout layout, Dtype dtype, std::optional<Device> device = std::nullopt,
                     Owner owner = Owner(), bool readonly = false);

}  // namespace stridex::cuda
