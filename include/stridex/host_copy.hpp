// Host copies (the core's): copies between host-accessible memory on the calling thread, and fresh host
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

// The preconditions of every copy, in this one place and one set of words, for copy_host and the
// copy engine (stridex::copy, include/stridex/cuda/copy.hpp):
//   * one dtype (no casting) and one shape -> else Error(value);
//   * dst writable -> else Error(buffer) "cannot copy into a read-only view";
//   * dst has one place for every element (no zero or overlapping strides: "which write wins" has
//     no answer on a GPU, so none on the host either) -> else Error(buffer);
//   * packed sub-byte views (whose elements have no byte address) copy only to packed views, both
//     C-contiguous -> else Error(unsupported).
// Which memory each copy reaches is the copy's own rule (copy_host: host-accessible memory).
void check_copy(const View& dst, const View& src);

// Copies the elements of `src` into `dst`, element (i, j, ...) to element (i, j, ...). Both must
// be host-accessible (else Error(buffer)) and meet check_copy. Overlapping memory is handled
// (through a temporary).
void copy_host(const View& dst, const View& src);

// A C-contiguous host copy of `src` (see allocate_host), writable, with no pending stream; sub-byte
// data keeps its packing. The caller makes sure pending device work on src is finished.
View host_copy(const View& src);

namespace detail {
// copy_host for a pair check_copy has passed already, host-accessible on both sides: the copy
// engine's host path, which checks once for every path.
void copy_host_checked(const View& dst, const View& src);
}  // namespace detail

}  // namespace stridex
