// Host copies: copies between host-accessible memory on the calling thread, and fresh host
// buffers. The copy engine, which copies between any two devices (`stridex::copy`, `copy_to`,
// `allocate`), is the CUDA layer's: include/stridex/cuda/copy.hpp (docs/copy.md).
//
// The result of host_copy is always C-contiguous, so a consumer that only takes compact strides
// (JAX, O7 in docs/protocols.md) can read it.
#pragma once

#include <cstdint>
#include <span>

#include "stridex/view.hpp"

namespace stridex {

// A fresh, writable, C-contiguous host buffer of `shape` elements of `dtype` on Device::cpu(),
// 64-byte aligned and never NULL (even when empty), freed when the last View of it goes. The
// contents are uninitialised. Sub-byte dtypes are packed unless subbyte_padded (one element a
// byte, DLPack's IS_SUBBYTE_TYPE_PADDED). Bad shapes are Error(value); a failed allocation is
// std::bad_alloc.
View allocate_host(std::span<const std::int64_t> shape, Dtype dtype, bool subbyte_padded = false);

// Copies the elements of `src` into `dst`, element (i, j, ...) to element (i, j, ...). Both must
// be host-accessible, have one shape and one dtype, and `dst` must be writable -> else
// Error(buffer) or Error(value). Overlapping memory is handled (through a temporary). A dst with
// zero strides (several indices on one element) gets the last value in C order.
void copy_host(const View& dst, const View& src);

// A C-contiguous host copy of `src` (see allocate_host), writable, with no pending stream; sub-byte
// data keeps its packing. The caller makes sure pending device work on src is finished.
View host_copy(const View& src);

}  // namespace stridex
