// The copy kernels, compiled by nvcc into a fatbin that the library embeds (copy_fatbin.cpp) and
// loads through the driver API at first use. Two kernels, each instantiated for units of 1, 2, 4,
// 8 and 16 bytes (the plan widens contiguous runs to the largest unit their alignment allows):
//
//   strided: any layouts, one thread per unit, kUnroll loads in flight per thread. In rows mode a
//            block walks part of one innermost row, so the outer index is decomposed once per block
//            and the inner loop is a multiply-add; in elements mode (short rows) every unit
//            decomposes its own index.
//   tiled:   transposes (dst's contiguous axis is not src's): a kTile x kTile tile is read along
//            src's contiguous axis and written along dst's, through shared memory padded so that
//            the column reads hit 32 distinct banks for every element size (see kPad).
//
// Both kernels loop over their blocks (grid-stride), so any size runs on a grid sized to the GPU.
#include <stdint.h>

#include "copy_abi.h"

namespace stridex::kernels {
namespace {

template <int Bytes>
struct UnitOf;
template <>
struct UnitOf<1> {
    using type = uint8_t;
};
template <>
struct UnitOf<2> {
    using type = uint16_t;
};
template <>
struct UnitOf<4> {
    using type = uint32_t;
};
template <>
struct UnitOf<8> {
    using type = uint64_t;
};
template <>
struct UnitOf<16> {
    using type = uint4;
};

// Offsets of the outer index `index` over axes [0, last), C order.
__device__ __forceinline__ void outer_offsets(const int64_t* shape, const int64_t* ds, const int64_t* ss, int last,
                                              int64_t index, int64_t& doff, int64_t& soff) {
    doff = 0;
    soff = 0;
    for (int a = last - 1; a >= 0; --a) {
        const int64_t e = shape[a];
        const int64_t q = index / e;
        const int64_t i = index - q * e;
        index = q;
        doff += i * ds[a];
        soff += i * ss[a];
    }
}

// The same with 32-bit division (several times cheaper), for index spaces below 2^31.
__device__ __forceinline__ void outer_offsets32(const int64_t* shape, const int64_t* ds, const int64_t* ss, int last,
                                                uint32_t index, int64_t& doff, int64_t& soff) {
    doff = 0;
    soff = 0;
    for (int a = last - 1; a >= 0; --a) {
        const uint32_t e = static_cast<uint32_t>(shape[a]);
        const uint32_t q = index / e;
        const uint32_t i = index - q * e;
        index = q;
        doff += int64_t{i} * ds[a];
        soff += int64_t{i} * ss[a];
    }
}

template <int Bytes>
__device__ __forceinline__ void strided(const StridedArgs& p) {
    using T = typename UnitOf<Bytes>::type;
    const int last = p.ndim - 1;
    const int64_t inner = p.shape[last];
    const int64_t dsi = p.dst_stride[last], ssi = p.src_stride[last];
    char* const dst = reinterpret_cast<char*>(p.dst);
    const char* const src = reinterpret_cast<const char*>(p.src);
    constexpr int64_t kPerBlock = int64_t{kThreads} * kUnroll;
    if (p.rows_mode) {
        for (int64_t b = blockIdx.x; b < p.blocks; b += gridDim.x) {
            const int64_t row = b / p.inner_blocks;
            const int64_t chunk = b - row * p.inner_blocks;
            int64_t doff, soff;
            outer_offsets(p.shape, p.dst_stride, p.src_stride, last, row, doff, soff);
            const int64_t first = chunk * kPerBlock + threadIdx.x;
            T v[kUnroll];
#pragma unroll
            for (int k = 0; k < kUnroll; ++k) {
                const int64_t i = first + int64_t{k} * kThreads;
                if (i < inner) v[k] = *reinterpret_cast<const T*>(src + soff + i * ssi);
            }
#pragma unroll
            for (int k = 0; k < kUnroll; ++k) {
                const int64_t i = first + int64_t{k} * kThreads;
                if (i < inner) *reinterpret_cast<T*>(dst + doff + i * dsi) = v[k];
            }
        }
        return;
    }
    int64_t total = 1;
    for (int a = 0; a < p.ndim; ++a) total *= p.shape[a];
    for (int64_t b = blockIdx.x; b < p.blocks; b += gridDim.x) {
        T v[kUnroll];
        int64_t doffs[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            const int64_t e = b * kPerBlock + int64_t{k} * kThreads + threadIdx.x;
            doffs[k] = -1;
            if (e < total) {
                int64_t doff, soff;
                if (total < (int64_t{1} << 31))
                    outer_offsets32(p.shape, p.dst_stride, p.src_stride, p.ndim, static_cast<uint32_t>(e), doff, soff);
                else
                    outer_offsets(p.shape, p.dst_stride, p.src_stride, p.ndim, e, doff, soff);
                v[k] = *reinterpret_cast<const T*>(src + soff);
                doffs[k] = doff;
            }
        }
#pragma unroll
        for (int k = 0; k < kUnroll; ++k)
            if (doffs[k] >= 0) *reinterpret_cast<T*>(dst + doffs[k]) = v[k];
    }
}

// Row padding of the shared tile, in elements: a tile row then spans 4 bytes (elements of 1, 2
// and 4 bytes) or one element (8, 16) more than a multiple of 128 bytes, so the 32 reads of a
// column fall in 32 distinct banks (8- and 16-byte reads are split in half and quarter warps, in
// which the same holds). With Vec > 1 a thread reads `Vec` rows of a column: the row stride in
// 4-byte words times Vec must be odd, hence a pad of one element there.
template <int Bytes, int Vec>
constexpr int kPad = Vec > 1 ? 1 : (Bytes >= 4 ? 1 : 4 / Bytes);

// One tile: kTile * Vec * Rep elements a side. Each thread moves Vec neighbours (as one 4-byte
// word when Vec > 1) at Rep places 32 * Vec apart along the row, for every kTileRows-th row: all
// of its loads are issued before the first shared store (unrolled, compile-time loops), so a
// thread has kSide / kTileRows * Rep loads in flight.
template <int Bytes, int Vec, int Rep>
__device__ __forceinline__ void tiled(const TiledArgs& p) {
    using T = typename UnitOf<Bytes>::type;
    constexpr int kSide = kTile * Vec * Rep;
    constexpr int kRow = kSide + kPad<Bytes, Vec>;
    constexpr int kRows = kSide / kTileRows;  // rows (then columns) each thread visits
    using Word = typename UnitOf<Vec * Bytes>::type;
    __shared__ T tile[kSide * kRow];
    char* const dst = reinterpret_cast<char*>(p.dst);
    const char* const src = reinterpret_cast<const char*>(p.src);
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t b = blockIdx.x; b < p.blocks; b += gridDim.x) {
        int64_t t = b;
        const int64_t tj = t % p.tiles_j;
        t /= p.tiles_j;
        const int64_t ti = t % p.tiles_i;
        const int64_t batch = t / p.tiles_i;
        int64_t doff, soff;
        outer_offsets(p.shape, p.dst_stride, p.src_stride, p.nbatch, batch, doff, soff);
        const int64_t i0 = ti * kSide, j0 = tj * kSide;
        // Read along J (src's contiguous axis).
        Word w[kRows][Rep];
#pragma unroll
        for (int k = 0; k < kRows; ++k) {
            const int64_t i = i0 + ty + k * kTileRows;
#pragma unroll
            for (int r = 0; r < Rep; ++r) {
                const int64_t j = j0 + int64_t{(r * kTile + tx) * Vec};
                const char* s = src + soff + i * p.src_i + j * p.src_j;
                w[k][r] = Word{};
                if (i < p.ni) {
                    if (j + Vec <= p.nj) {
                        w[k][r] = *reinterpret_cast<const Word*>(s);
                    } else if constexpr (Vec > 1) {
                        for (int v = 0; v < Vec; ++v)
                            if (j + v < p.nj)
                                w[k][r] |= static_cast<Word>(*reinterpret_cast<const T*>(s + v * p.src_j))
                                           << (8 * Bytes * v);
                    }
                }
            }
        }
#pragma unroll
        for (int k = 0; k < kRows; ++k)
#pragma unroll
            for (int r = 0; r < Rep; ++r) {
                T* row = tile + (ty + k * kTileRows) * kRow + (r * kTile + tx) * Vec;
                if constexpr (Vec > 1) {
#pragma unroll
                    for (int v = 0; v < Vec; ++v) row[v] = static_cast<T>(w[k][r] >> (8 * Bytes * v));
                } else {
                    row[0] = w[k][r];
                }
            }
        __syncthreads();
        // Write along I (dst's contiguous axis). Rows and columns the view does not have hold
        // garbage in the tile and are never stored.
#pragma unroll
        for (int k = 0; k < kRows; ++k) {
            const int c = ty + k * kTileRows;
            const int64_t jj = j0 + c;
            if (jj >= p.nj) break;
#pragma unroll
            for (int r = 0; r < Rep; ++r) {
                const int e = (r * kTile + tx) * Vec;  // first tile row this thread writes
                const int64_t i = i0 + e;
                char* d = dst + doff + i * p.dst_i + jj * p.dst_j;
                const T* col = tile + e * kRow + c;
                if (i + Vec <= p.ni) {
                    if constexpr (Vec > 1) {
                        Word word = 0;
#pragma unroll
                        for (int v = 0; v < Vec; ++v) word |= static_cast<Word>(col[v * kRow]) << (8 * Bytes * v);
                        *reinterpret_cast<Word*>(d) = word;
                    } else {
                        *reinterpret_cast<T*>(d) = col[0];
                    }
                } else {
                    for (int v = 0; v < Vec; ++v)
                        if (i + v < p.ni) *reinterpret_cast<T*>(d + v * p.dst_i) = col[v * kRow];
                }
            }
        }
        __syncthreads();  // the next tile overwrites the shared buffer
    }
}

}  // namespace
}  // namespace stridex::kernels

using stridex::kernels::StridedArgs;
using stridex::kernels::TiledArgs;

// Entry points by name (cuModuleGetFunction): extern "C", one per unit size.
#define STRIDEX_STRIDED(B) \
    extern "C" __global__ void __launch_bounds__(stridex::kernels::kThreads) \
        stridex_strided_##B(const StridedArgs p) { \
        stridex::kernels::strided<B>(p); \
    }
STRIDEX_STRIDED(1)
STRIDEX_STRIDED(2)
STRIDEX_STRIDED(4)
STRIDEX_STRIDED(8)
STRIDEX_STRIDED(16)

#define STRIDEX_TILED(B, V, R) \
    extern "C" __global__ void __launch_bounds__(stridex::kernels::kTile* stridex::kernels::kTileRows) \
        stridex_tiled_##B##_##V(const TiledArgs p) { \
        stridex::kernels::tiled<B, V, R>(p); \
    }
// Rep (the last argument) must match tile_side() in src/cuda/copy_kernels.cpp.
STRIDEX_TILED(1, 1, 1)
STRIDEX_TILED(1, 4, 1)
STRIDEX_TILED(2, 1, 1)
STRIDEX_TILED(2, 2, 2)
STRIDEX_TILED(4, 1, 2)
STRIDEX_TILED(8, 1, 2)
STRIDEX_TILED(16, 1, 1)
