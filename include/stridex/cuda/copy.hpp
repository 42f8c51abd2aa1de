// The copy engine: copies between strided views anywhere, `stridex::copy(dst, src, stream)`, and
// fresh views on any device (docs/copy.md). CUDA layer (src/cuda/copy_*.cpp, link stridex::cuda);
// the names stay in namespace stridex, as the user-facing Array and constraints do: the header's
// folder says which layer defines them, the namespace who calls them (docs/layout.md).
//
// copy() takes any two Views of one shape and dtype, each on the CPU, a CUDA device (any
// ordinal), pinned or managed memory, with any strides (negative; zero in src to broadcast). Copies
// between host-accessible memory run on the calling thread (copy_host, include/stridex/host_copy.hpp);
// copies that touch device memory are queued on a CUDA stream (src/cuda/copy_engine.cpp): driver
// memcpy for contiguous layouts, the embedded kernels for the rest, pinned staging buffers between
// pageable host memory and the GPU.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "stridex/host_copy.hpp"
#include "stridex/view.hpp"

namespace stridex {

// The stream argument of the copy engine, in the DLPack encoding of View::stream():
// kDefaultStream (1, view.hpp) the legacy default stream (the default, as the array API's None), 2
// the per-thread default stream, any other value above 2 a CUstream handle of the device that runs
// the copy (dst's GPU, else src's). kNoStream (-1) queues the copy on the legacy default stream and
// waits for it before returning.

// Element order of a fresh copy: C (row-major), F (column-major) or K (the source's order of axes,
// by decreasing stride magnitude, as NumPy's order='K': the cheapest copy of a transposed view).
enum class Order : char { C = 'C', F = 'F', K = 'K' };
// The letter of an order, as Python spells it ("C", "F" or "K"); anything else is Error(value)
// "order must be 'C', 'F' or 'K', found '...'". The one parser of the letter (stridex.empty,
// View.copy).
Order parse_order(std::string_view letter);

class Allocator;  // stridex/cuda/memory.hpp

// A fresh, writable, dense view of `shape` on `device`: cpu (allocate_host), cuda:N (the GPU's
// stream-ordered pool, allocated on `stream`), cuda_host (the pinned pool, portable) or
// cuda_managed (cuMemAllocManaged), freed when the last View of it goes (docs/memory.md). With an
// `allocator`, the memory is that allocator's (every device, cpu included). Contents
// uninitialised. Other devices: Error(value); out of memory: Error(memory).
View allocate(std::span<const std::int64_t> shape, Dtype dtype, Device device, Order order = Order::C,
              bool subbyte_padded = false, std::intptr_t stream = kDefaultStream, const Allocator* allocator = nullptr);

// Copies src into dst, element (i, j, ...) to element (i, j, ...). Both must have one shape and
// one dtype (no casting) -> else Error(value); dst must be writable and must not address one
// element twice (zero or overlapping strides) -> else Error(buffer). Overlapping dst/src memory is
// copied through a temporary. Packed sub-byte dtypes: C-contiguous views only.
//
// Stream contract (docs/copy.md): the copy is queued on `stream` after the work pending on
// src.stream() and dst.stream() (event waits, no host block). Returns the stream dst's data is
// ready on: `stream`, or kNoStream when the copy completed before returning (host copies, staged
// copies into pageable host memory, copies into or out of the pageable pool's blocks, which are
// page-locked when reused (docs/memory.md), stream = kNoStream).
std::intptr_t copy(const View& dst, const View& src, std::intptr_t stream = kDefaultStream);

// A fresh copy of src on `device` in `order`, ready on the returned View's stream() (see copy()).
// Its memory is allocated on that stream, by `allocator` when given (see allocate).
View copy_to(const View& src, Device device, Order order = Order::C, std::intptr_t stream = kDefaultStream,
             const Allocator* allocator = nullptr);

// `src` itself when it is C-contiguous, else copy_to(src, src.device(), Order::C, stream, allocator).
View contiguous(const View& src, std::intptr_t stream = kDefaultStream, const Allocator* allocator = nullptr);

// `src` itself when it is on `device` already, else copy_to(src, device, Order::K, stream, allocator).
View to_device(const View& src, Device device, std::intptr_t stream = kDefaultStream,
               const Allocator* allocator = nullptr);

}  // namespace stridex
