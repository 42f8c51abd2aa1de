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
    int32_t order;  // vector transpose: 0 tiles along J first, -1 along I first, H > 0 in bands of H tile rows
    int32_t pad_;
    int64_t shape[kMaxAxes];
    int64_t dst_stride[kMaxAxes];
    int64_t src_stride[kMaxAxes];
};

// The vector transpose: like the tiled one, but every global access is a 16-byte vector on both
// sides (the plan's `tile_vectors`: both bases and every stride but the unit ones are multiples of
// 16 bytes, both tile extents multiples of V = 16 / unit elements). A thread reads V src rows of
// one vector, transposes that V x V block in registers and writes V dst rows of one vector, so
// shared memory is only read and written in 16-byte chunks too. Units of 1, 2, 4 and 8 bytes; the
// tile is ti x tj elements (ti along dst's contiguous axis I, tj along src's J), moved by `threads`
// threads of a 1-d block. Indexed by slot (unit 1, 2, 4, 8) and by variant (kVecVariants: the
// candidates measured against each other; the engine uses variant 0 unless told otherwise).
struct VecTile {
    int ti, tj, threads;
    int mode;        // 0: through registers; 1: cp.async (sm_80+); 2: cp.async, double-buffered
    int min_blocks;  // resident blocks per SM the registers must allow (__launch_bounds__)
};
constexpr int kVecVariants = 6;
constexpr VecTile kVecTiles[kVecVariants][4] = {
    {{128, 128, 256, 0, 4}, {128, 128, 256, 0, 4}, {64, 64, 256, 0, 4}, {32, 32, 256, 0, 4}},
    {{128, 128, 256, 1, 4}, {128, 128, 256, 1, 4}, {64, 64, 256, 1, 4}, {64, 64, 256, 1, 4}},
    {{256, 256, 256, 1, 3}, {256, 128, 256, 1, 3}, {128, 64, 256, 1, 4}, {64, 64, 256, 1, 4}},
    {{256, 256, 512, 1, 1}, {128, 128, 512, 1, 2}, {128, 128, 512, 1, 1}, {128, 64, 512, 1, 2}},
    {{128, 128, 256, 1, 6}, {128, 128, 256, 1, 6}, {64, 64, 256, 1, 6}, {64, 32, 256, 1, 6}},
    {{256, 128, 256, 2, 3}, {128, 64, 256, 2, 4}, {64, 64, 256, 2, 6}, {64, 32, 256, 2, 6}},
};
// Shared memory of a vector tile (dynamic: more than 48 KiB takes an opt-in, see copy_kernels.cpp).
constexpr int vec_tile_bytes(const VecTile& t, int unit) { return t.ti * t.tj * unit * (t.mode == 2 ? 2 : 1); }

}  // namespace stridex::kernels
