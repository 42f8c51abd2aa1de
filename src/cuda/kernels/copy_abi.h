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

// The tiled transposes (element, vector and shifted tiles): axis I is dst's contiguous axis, axis J
// src's; tiles are read along J and written along I through shared memory. Every other axis is a
// batch axis (`nbatch` of them, outermost first).
constexpr int kTile = 32;
constexpr int kTileRows = 8;  // blockDim.y of the element tile: each thread moves side / kTileRows rows
struct TiledArgs {
    uint64_t dst, src;
    int64_t blocks;  // tiles_i * tiles_j * batch
    int64_t tiles_i, tiles_j;
    int64_t ni, nj;
    int64_t dst_i, dst_j, src_i, src_j;
    int32_t nbatch;
    int64_t shape[kMaxAxes];
    int64_t dst_stride[kMaxAxes];
    int64_t src_stride[kMaxAxes];
};

// The vector transpose: like the tiled one, but every global access is a 16-byte vector on both
// sides (the plan's `tile_vectors`: both bases and every stride but the unit ones are multiples of
// 16 bytes, both tile extents multiples of V = 16 / unit elements). Shared memory is written and
// read in chunks of 16 and 4 (8) bytes; a thread turns V rows of one word into whole dst vectors
// in registers. Units of 1, 2, 4 and 8 bytes, one shape each (kVecTiles, by unit 1, 2, 4, 8):
// a tile of ti x tj elements (ti along dst's contiguous axis I, tj along src's J), moved by
// `threads` threads of a 1-d block. The shapes are the fastest of those measured on an H200
// (docs/runs/bench-copy-kernels-h200.txt): runs of >= 256 bytes on both sides, for 1-byte units
// 256 x 256 (64 KiB of shared memory) with every chunk in flight at once through cp.async.
struct VecTile {
    int ti, tj, threads;
    bool async;      // chunks copied to shared memory by cp.async (sm_80+; older GPUs: registers)
    bool i_first;    // tiles visited along I first (else along J)
    int min_blocks;  // resident blocks per SM the registers must allow (__launch_bounds__)
};
constexpr VecTile kVecTiles[4] = {
    {256, 256, 512, true, false, 1},  // 1 byte: 64 KiB
    {128, 128, 256, false, true, 4},  // 2 bytes: 32 KiB
    {64, 64, 256, false, false, 4},   // 4 bytes: 16 KiB
    {64, 64, 256, true, false, 4},    // 8 bytes: 32 KiB
};
// Dynamic shared memory of a vector tile (more than 48 KiB takes an opt-in, see copy_kernels.cpp).
constexpr int vec_tile_bytes(const VecTile& t, int unit) { return t.ti * t.tj * unit; }

// The shifted transpose: the vector transpose for layouts whose 16-byte vectors do not line up
// (rows of odd lengths such as 8191 x 8195, misaligned bases), for units of 1 and 2 bytes: each src
// row piece is read as the aligned 16-byte chunks that cover it and shifted into place in registers
// (neighbouring lanes hand each other their chunks), and each dst row piece is written as the
// aligned vectors that cover it, shifted the other way, its two ends by partial stores. The shared
// tile and the strips are the vector transpose's. Registers instead of cp.async (the shift happens
// on the way in), so the 1-byte tile is smaller. Units of 4 and 8 bytes take the element tile
// instead, which measured faster for them on an H200 (odd float32 transposes 66 % of a same-size
// copy against 56 %, float64 88 % against 68 %; docs/runs/session-kernels-refit-h200.txt). Shapes by
// unit 1, 2 (`async` unused).
constexpr VecTile kShiftTiles[2] = {
    {128, 128, 256, false, false, 4},  // 1 byte: 16 KiB
    {128, 128, 256, false, true, 4},   // 2 bytes: 32 KiB
};

// The narrow transpose: one of the two transposed axes is short (`ns` < the plan's kMinTileExtent
// elements, such as the 3 channels of an image) and packed on one side, so that `chunk` steps of
// the long axis times all of the short one are one contiguous run there (the packed side); on the
// other side (the rows side) the short axis steps `rows_stride` bytes between rows along which the
// long axis is contiguous. A block moves that run and its `ns` row pieces through shared memory
// ([ns][chunk] elements), both sides in 16-byte vectors where they line up.
constexpr int kNarrowThreads = 256;
constexpr int kNarrowTileBytes = 16384;  // the most shared memory a block takes; chunk is sized to it
struct NarrowArgs {
    uint64_t dst, src;
    int64_t blocks;       // chunks * batch
    int64_t chunks;       // chunks of the long axis per batch index
    int64_t nl;           // long extent
    int64_t rows_stride;  // bytes between the short axis's rows on the rows side
    int32_t ns;           // short extent
    int32_t chunk;        // long-axis elements per block: a multiple of 16
    int32_t packed_dst;   // 1: dst is the packed side (the short axis is dst's contiguous one); 0: src
    int32_t vec_rows;     // the rows side's base, rows_stride and batch strides are multiples of 16
    int32_t vec_packed;   // the packed side's base and batch strides are multiples of 16
    int32_t nbatch;
    int64_t shape[kMaxAxes];
    int64_t dst_stride[kMaxAxes];
    int64_t src_stride[kMaxAxes];
};

}  // namespace stridex::kernels
