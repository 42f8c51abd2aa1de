// The argument blocks of the copy kernels: shared, byte for byte, by the kernels (copy_kernels.cu,
// compiled by nvcc) and by the host code that fills them (src/cuda/copy_kernels.cpp). Plain C++ on
// purpose: nvcc compiles this header too.
//
// Every stride and offset is in BYTES. Axes are ordered outermost first; the copy plan
// (copy_plan.hpp) has already dropped extent-1 axes, fused neighbours and widened the unit, so the
// kernels see few axes and large units.
#pragma once

#include <stdint.h>

namespace stridex::kernels {

// Most axes a kernel takes. A copy whose layouts stay above this after fusing has at least 2^17
// elements spread over 17 axes none of which can be fused; the engine refuses it by name.
constexpr int kMaxAxes = 16;

// Threads per block of the strided kernels and units each thread moves (several loads in flight
// before the first store).
constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// The generic strided copy: `ndim` axes (the last is the innermost of dst). `inner_blocks` blocks
// cover one row of the innermost axis; `blocks` = rows * inner_blocks in total (rows mode), or
// the element count split in kThreads * kUnroll pieces (elements mode, for short rows).
struct StridedArgs {
    uint64_t dst, src;
    int64_t blocks;
    int64_t inner_blocks;
    int32_t ndim;
    int32_t rows_mode;  // 1: rows mode, 0: elements mode
    int64_t shape[kMaxAxes];
    int64_t dst_stride[kMaxAxes];
    int64_t src_stride[kMaxAxes];
};

// The tiled transpose: axis I is dst's contiguous axis, axis J src's; tiles of kTile * vec
// elements square are read along J and written along I through shared memory. Every other axis is
// a batch axis (`nbatch` of them, outermost first). `vec` > 1 (elements of 1 or 2 bytes) moves
// `vec` neighbouring elements as one 4-byte word on both sides.
constexpr int kTile = 32;
constexpr int kTileRows = 8;  // blockDim.y: each thread moves kTile * vec / kTileRows rows
struct TiledArgs {
    uint64_t dst, src;
    int64_t blocks;  // tiles_i * tiles_j * batch
    int64_t tiles_i, tiles_j;
    int64_t ni, nj;
    int64_t dst_i, dst_j, src_i, src_j;
    int32_t nbatch;
    int32_t vec;
    int64_t shape[kMaxAxes];
    int64_t dst_stride[kMaxAxes];
    int64_t src_stride[kMaxAxes];
};

}  // namespace stridex::kernels
