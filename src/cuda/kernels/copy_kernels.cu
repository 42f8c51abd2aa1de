// The copy kernels, compiled by nvcc into a fatbin that the library embeds (copy_fatbin.cpp) and
// loads through the driver API at first use. Three kernels, instantiated for units of 1, 2, 4, 8
// and 16 bytes (the plan widens contiguous runs to the largest unit their alignment allows):
//
//   strided: any layouts, one thread per unit, kUnroll loads in flight per thread. In rows mode a
//            block walks part of one innermost row, so the outer index is decomposed once per block
//            and the inner loop is a multiply-add; in elements mode (short rows) every unit
//            decomposes its own index.
//   tiled:   transposes of 4-, 8- and 16-byte units whose vectors do not line up: a tile is read
//            along src's contiguous axis and written along dst's, one element at a time, through
//            shared memory padded so that the column reads hit 32 distinct banks (see kPad).
//   vtiled:  transposes whose 16-byte vectors line up on both sides (units of 1 to 8 bytes): the
//            tile moves in 16-byte chunks from src and 16-byte vectors to dst, and each thread
//            transposes strips of V = 16 / unit rows in registers (byte permutes for 1 and 2).
//   stiled:  the vtiled tile for any alignment (odd row lengths, misaligned bases), units of 1 and 2
//            bytes: aligned 16-byte chunks and vectors on both sides, shifted across lanes.
//   narrow:  transposes with one short axis packed on one side (NCHW <-> NHWC with 3 channels): a
//            contiguous run on the packed side and its few rows on the other, through shared memory.
//
// All loop over their blocks (grid-stride), so any size runs on a grid sized to the GPU.
#include <stdint.h>

#include "copy_abi.h"

// Dynamic shared memory (the launch's shared_bytes). The CPU emulation in tests/cpp/emulated, which
// compiles this file as host C++, gives each emulated block its own.
#ifndef STRIDEX_DYNAMIC_SHARED
#define STRIDEX_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

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

// Row padding of the shared tile: one element, so that a tile row spans one element more than a
// multiple of 128 bytes and the 32 reads of a column fall in 32 distinct banks (8- and 16-byte
// reads are split in half and quarter warps, in which the same holds).
constexpr int kPad = 1;

// The element tile: kTile * Rep elements a side, for units of 4, 8 and 16 bytes whose vectors do
// not line up. Each thread moves one element at Rep places 32 apart along the row, for every
// kTileRows-th row: all of its loads are issued before the first shared store (unrolled,
// compile-time loops), so a thread has kSide / kTileRows * Rep loads in flight.
template <int Bytes, int Rep>
__device__ __forceinline__ void tiled(const TiledArgs& p) {
    using T = typename UnitOf<Bytes>::type;
    constexpr int kSide = kTile * Rep;
    constexpr int kRow = kSide + kPad;
    constexpr int kRows = kSide / kTileRows;  // rows (then columns) each thread visits
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
        T w[kRows][Rep];
#pragma unroll
        for (int k = 0; k < kRows; ++k) {
            const int64_t i = i0 + ty + k * kTileRows;
#pragma unroll
            for (int r = 0; r < Rep; ++r) {
                const int64_t j = j0 + int64_t{r * kTile + tx};
                w[k][r] = T{};
                if (i < p.ni && j < p.nj) w[k][r] = *reinterpret_cast<const T*>(src + soff + i * p.src_i + j * p.src_j);
            }
        }
#pragma unroll
        for (int k = 0; k < kRows; ++k)
#pragma unroll
            for (int r = 0; r < Rep; ++r) tile[(ty + k * kTileRows) * kRow + r * kTile + tx] = w[k][r];
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
                const int e = r * kTile + tx;  // the tile row this thread writes
                const int64_t i = i0 + e;
                if (i < p.ni) *reinterpret_cast<T*>(dst + doff + i * p.dst_i + jj * p.dst_j) = tile[e * kRow + c];
            }
        }
        __syncthreads();  // the next tile overwrites the shared buffer
    }
}

// One column strip of a tile, transposed: V rows (V = 16 / E elements of E bytes) of one word of W
// bytes each (W = max(E, 4)) become W / E vectors of 16 bytes, each one element column of the
// strip in row order. Whole words move for 4- and 8-byte elements; byte permutes for 1 and 2.
template <int E>
struct Strip {
    static constexpr int V = 16 / E, W = E > 4 ? E : 4, N = W / E;  // N: vectors out
    using Word = typename UnitOf<W>::type;
    __device__ __forceinline__ static void transpose(const Word (&a)[V], uint4 (&out)[N]) {
        if constexpr (E == 8) {
            out[0] = make_uint4(static_cast<uint32_t>(a[0]), static_cast<uint32_t>(a[0] >> 32),
                                static_cast<uint32_t>(a[1]), static_cast<uint32_t>(a[1] >> 32));
        } else if constexpr (E == 4) {
            out[0] = make_uint4(a[0], a[1], a[2], a[3]);
        } else if constexpr (E == 2) {  // word k of column x: element x of rows 2k and 2k + 1
#pragma unroll
            for (int x = 0; x < 2; ++x) {
                const unsigned sel = x ? 0x7632 : 0x5410;
                out[x] = make_uint4(__byte_perm(a[0], a[1], sel), __byte_perm(a[2], a[3], sel),
                                    __byte_perm(a[4], a[5], sel), __byte_perm(a[6], a[7], sel));
            }
        } else {  // E == 1: word k of column x: byte x of rows 4k .. 4k + 3
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const unsigned sel = x | ((x + 4) << 4);
                uint32_t w[4];
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    w[k] = __byte_perm(__byte_perm(a[4 * k], a[4 * k + 1], sel),
                                       __byte_perm(a[4 * k + 2], a[4 * k + 3], sel), 0x5410);
                out[x] = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
    }
};

// Strip (ib, jw) of a tile laid out as the vector transposes keep it (TI rows of CJ 16-byte chunks,
// chunk c of row r at c ^ ((r / V) % 8)), transposed: the V rows from ib * V on, of word jw.
template <int E, int CJ>
__device__ __forceinline__ void gather_strip(const typename Strip<E>::Word* words, int ib, int jw,
                                             uint4 (&out)[Strip<E>::N]) {
    using S = Strip<E>;
    constexpr int V = S::V, kWordsPerChunk = 16 / S::W;
    typename S::Word a[V];
    const int chunk = (jw / kWordsPerChunk) ^ (ib & 7), within = jw % kWordsPerChunk;
#pragma unroll
    for (int v = 0; v < V; ++v) a[v] = words[((ib * V + v) * CJ + chunk) * kWordsPerChunk + within];
    S::transpose(a, out);
}

// cp.async exists from sm_80 on. The image also carries SASS for older GPUs (sm_70, sm_75), where a
// vector tile asking for it is loaded through registers instead, as the tiles that do not ask are.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr bool kHasCpAsync = false;
#else
constexpr bool kHasCpAsync = true;
#endif

#if defined(__CUDACC__)
[[maybe_unused]] __device__ __forceinline__ void cp_async16(void* smem, const void* global) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(global) : "memory");
}
[[maybe_unused]] __device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#else  // the CPU emulation (tests/cpp/emulated): a copy that has completed when it returns
inline void cp_async16(void* smem, const void* global) {
    *static_cast<uint4*>(smem) = *static_cast<const uint4*>(global);
}
inline void cp_async_commit() {}
template <int N>
void cp_async_wait() {}
#endif

// Where tile `b` of TI x TJ elements starts on both sides: its first indices along I and J and
// its first element in src and dst (32-bit division whenever the tile count allows it).
struct Where {
    int64_t i0, j0;
    const char* s;
    char* d;
};
template <int E, int TI, int TJ, bool IFirst>
__device__ __forceinline__ Where tile_at(const TiledArgs& p, int64_t b) {
    const char* const src = reinterpret_cast<const char*>(p.src);
    char* const dst = reinterpret_cast<char*>(p.dst);
    int64_t tj, ti, doff = 0, soff = 0;
    if (p.blocks <= INT32_MAX) {
        const uint32_t u = static_cast<uint32_t>(b), nj = static_cast<uint32_t>(p.tiles_j);
        const uint32_t ni = static_cast<uint32_t>(p.tiles_i);
        const uint32_t per = ni * nj, batch = u / per, in = u - batch * per;
        if constexpr (IFirst) {
            tj = in / ni;
            ti = in - static_cast<uint32_t>(tj) * ni;
        } else {
            ti = in / nj;
            tj = in - static_cast<uint32_t>(ti) * nj;
        }
        if (p.nbatch > 0) outer_offsets32(p.shape, p.dst_stride, p.src_stride, p.nbatch, batch, doff, soff);
    } else {
        const int64_t per = p.tiles_i * p.tiles_j, in = b % per;
        ti = IFirst ? in % p.tiles_i : in / p.tiles_j;
        tj = IFirst ? in / p.tiles_i : in % p.tiles_j;
        if (p.nbatch > 0) outer_offsets(p.shape, p.dst_stride, p.src_stride, p.nbatch, b / per, doff, soff);
    }
    const int64_t i0 = ti * TI, j0 = tj * TJ;
    return Where{i0, j0, src + soff + i0 * p.src_i + j0 * E, dst + doff + j0 * p.dst_j + i0 * E};
}

// The vector transpose (VecTile in copy_abi.h). The tile sits in shared memory as src wrote it:
// TI rows (along I) of CJ 16-byte chunks (along J). Chunk c of row r is stored at c ^ ((r / V) % 8)
// so that both the row-wise chunk writes and the strip reads (8 lanes: 8 strips down I, the same
// word of one chunk column) hit distinct banks.
template <int E, int TI, int TJ, int NT, bool AskAsync, bool IFirst>
__device__ __forceinline__ void vtiled(const TiledArgs& p) {
    constexpr bool Async = AskAsync && kHasCpAsync;
    constexpr int V = 16 / E;
    constexpr int CJ = TJ / V;            // chunks per tile row
    constexpr int MI = TI / V;            // blocks down I
    constexpr int kLoads = TI * CJ / NT;  // chunks each thread reads
    using S = Strip<E>;
    constexpr int kWordsPerChunk = 16 / S::W;
    constexpr int kLanesJ = 4;                              // strips across J per warp row
    constexpr int kStrips = MI * CJ * kWordsPerChunk / NT;  // strips each thread transposes
    static_assert(CJ % 8 == 0 && MI % 8 == 0 && TI * CJ % NT == 0 && MI * CJ * kWordsPerChunk % NT == 0);
    static_assert(CJ * kWordsPerChunk % kLanesJ == 0 && NT % 32 == 0);
    STRIDEX_DYNAMIC_SHARED(uint4, tile);  // TI * CJ chunks
    const int t = threadIdx.x;
    auto locate = [&](int64_t b) { return tile_at<E, TI, TJ, IFirst>(p, b); };
    auto slot = [](int r, int c) { return r * CJ + (c ^ ((r / V) & 7)); };
    // Reads the tile's chunks that the view has (the rest of the buffer is never stored).
    auto load = [&](const Where& w, uint4* buf) {
        const int64_t i0 = w.i0, j0 = w.j0;
        const char* const s = w.s;
        if constexpr (Async) {
#pragma unroll
            for (int k = 0; k < kLoads; ++k) {
                const int q = t + k * NT, r = q / CJ, c = q % CJ;
                if (i0 + r < p.ni && j0 + int64_t{c} * V < p.nj) cp_async16(buf + slot(r, c), s + r * p.src_i + c * 16);
            }
        } else {
            // Through registers, 4 chunks (64 bytes) in flight per thread at most: more would
            // spill within the 64 registers that 4 resident blocks of 256 threads leave.
            constexpr int kBatch = kLoads < 4 ? kLoads : 4;
#pragma unroll
            for (int k0 = 0; k0 < kLoads; k0 += kBatch) {
                uint4 v[kBatch];
#pragma unroll
                for (int k = 0; k < kBatch; ++k) {
                    const int q = t + (k0 + k) * NT, r = q / CJ, c = q % CJ;
                    if (i0 + r < p.ni && j0 + int64_t{c} * V < p.nj)
                        v[k] = *reinterpret_cast<const uint4*>(s + r * p.src_i + c * 16);
                }
#pragma unroll
                for (int k = 0; k < kBatch; ++k) {
                    const int q = t + (k0 + k) * NT;
                    buf[slot(q / CJ, q % CJ)] = v[k];
                }
            }
        }
    };
    // Strips: a warp takes 8 strips down I (so 8 lanes write 128 contiguous bytes of a dst row)
    // times 4 words across J; 8 lanes reading one word of 8 strips hit 8 distinct chunk slots.
    auto store = [&](const Where& w, const uint4* buf) {
        const int64_t i0 = w.i0, j0 = w.j0;
        char* const d = w.d;
        const auto* words = reinterpret_cast<const typename S::Word*>(buf);  // NOLINT: the tile as words
#pragma unroll 1
        for (int k = 0; k < kStrips; ++k) {
            const int m = t + k * NT, lane = m & 31, group = m >> 5;
            const int ib = group % (MI / 8) * 8 + (lane & 7);
            const int jw = group / (MI / 8) * kLanesJ + (lane >> 3);
            if (i0 + int64_t{ib} * V >= p.ni || j0 + int64_t{jw} * S::N >= p.nj) continue;
            uint4 out[S::N];
            gather_strip<E, CJ>(words, ib, jw, out);
            char* g = d + int64_t{jw} * S::N * p.dst_j + ib * 16;
#pragma unroll
            for (int x = 0; x < S::N; ++x) *reinterpret_cast<uint4*>(g + x * p.dst_j) = out[x];
        }
    };
    for (int64_t b = blockIdx.x; b < p.blocks; b += gridDim.x) {
        const Where here = locate(b);
        load(here, tile);
        if constexpr (Async) {  // every chunk of the tile in flight at once, none in registers
            cp_async_commit();
            cp_async_wait<0>();
        }
        __syncthreads();
        store(here, tile);
        __syncthreads();  // the next tile overwrites the buffer
    }
}

// A 16-byte vector seen as its elements (one element of 16 bytes).
template <int E>
union Lanes {
    static constexpr int V = E < 16 ? 16 / E : 1;
    uint4 vector;
    typename UnitOf<E>::type element[V];
};

// The narrow transpose (NarrowArgs in copy_abi.h). The shared tile is [ns][chunk] elements: row k
// holds the long axis's chunk at short index k, as the rows side lays it out, so that side moves
// whole vectors; the packed side's element f of the run is (long f / ns, short f % ns), gathered
// from (or scattered to) the tile one element at a time, in vectors to global memory.
template <int E>
__device__ __forceinline__ void narrow(const NarrowArgs& p) {
    using T = typename UnitOf<E>::type;
    using L = Lanes<E>;
    constexpr int V = L::V;
    STRIDEX_DYNAMIC_SHARED(uint4, narrow_tile);
    T* const tile = reinterpret_cast<T*>(narrow_tile);
    const int ns = p.ns, chunk = p.chunk, t = threadIdx.x;
    const bool reading_rows = p.packed_dst != 0;  // the rows side is src when dst is packed
    for (int64_t b = blockIdx.x; b < p.blocks; b += gridDim.x) {
        const int64_t batch = b / p.chunks, l0 = (b - batch * p.chunks) * chunk;
        int64_t doff = 0, soff = 0;
        if (p.nbatch > 0) outer_offsets(p.shape, p.dst_stride, p.src_stride, p.nbatch, batch, doff, soff);
        char* const dbase = reinterpret_cast<char*>(p.dst) + doff;
        char* const sbase = reinterpret_cast<char*>(p.src) + soff;
        char* const rows = (reading_rows ? sbase : dbase) + l0 * E;
        char* const packed = (reading_rows ? dbase : sbase) + l0 * ns * E;
        const int len = static_cast<int>(p.nl - l0 < chunk ? p.nl - l0 : chunk);
        // The rows side: ns rows of `len` contiguous elements, row k at rows + k * rows_stride.
        auto move_rows = [&](bool load) {
            if (p.vec_rows) {
                const int per_row = (len + V - 1) / V;
                for (int q = t; q < ns * per_row; q += kNarrowThreads) {
                    const int k = q / per_row, l = (q - k * per_row) * V;
                    char* g = rows + k * p.rows_stride + int64_t{l} * E;
                    T* s = tile + k * chunk + l;
                    if (l + V <= len) {
                        if (load)
                            *reinterpret_cast<uint4*>(s) = *reinterpret_cast<const uint4*>(g);
                        else
                            *reinterpret_cast<uint4*>(g) = *reinterpret_cast<const uint4*>(s);
                    } else {
                        for (int v = 0; v < len - l; ++v) {
                            if (load)
                                s[v] = reinterpret_cast<const T*>(g)[v];
                            else
                                reinterpret_cast<T*>(g)[v] = s[v];
                        }
                    }
                }
            } else {
                for (int q = t; q < ns * len; q += kNarrowThreads) {
                    const int k = q / len, l = q - k * len;
                    T* g = reinterpret_cast<T*>(rows + k * p.rows_stride) + l;
                    if (load)
                        tile[k * chunk + l] = *g;
                    else
                        *g = tile[k * chunk + l];
                }
            }
        };
        // The packed side: one run of len * ns elements, element f = (long f / ns, short f % ns).
        auto move_packed = [&](bool load) {
            const int run = len * ns;
            T* const g = reinterpret_cast<T*>(packed);
            if (p.vec_packed) {
                for (int q = t; q * V < run; q += kNarrowThreads) {
                    const int f = q * V;
                    int l = f / ns, k = f - l * ns;
                    if (f + V <= run) {
                        L lanes;
                        if (load) lanes.vector = reinterpret_cast<const uint4*>(g)[q];
#pragma unroll
                        for (int v = 0; v < V; ++v) {
                            if (load)
                                tile[k * chunk + l] = lanes.element[v];
                            else
                                lanes.element[v] = tile[k * chunk + l];
                            if (++k == ns) k = 0, ++l;
                        }
                        if (!load) reinterpret_cast<uint4*>(g)[q] = lanes.vector;
                    } else {
                        for (int e = f; e < run; ++e) {
                            if (load)
                                tile[k * chunk + l] = g[e];
                            else
                                g[e] = tile[k * chunk + l];
                            if (++k == ns) k = 0, ++l;
                        }
                    }
                }
            } else {
                for (int f = t; f < run; f += kNarrowThreads) {
                    const int l = f / ns, k = f - l * ns;
                    if (load)
                        tile[k * chunk + l] = g[f];
                    else
                        g[f] = tile[k * chunk + l];
                }
            }
        };
        if (reading_rows) {
            move_rows(true);
            __syncthreads();
            move_packed(false);
        } else {
            move_packed(true);
            __syncthreads();
            move_rows(false);
        }
        __syncthreads();  // the next chunk overwrites the tile
    }
}

// Bytes [sh, sh + 16) of the 32 bytes lo then hi (sh in 0..16).
__device__ __forceinline__ uint4 bytes_from(const uint4& lo, const uint4& hi, int sh) {
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const int q = sh >> 2;
    const unsigned r = static_cast<unsigned>(sh & 3) * 8;
    uint32_t o[5];
#pragma unroll
    for (int k = 0; k < 5; ++k) o[k] = q == 0 ? w[k] : q == 1 ? w[k + 1] : q == 2 ? w[k + 2] : w[k + 3];
    return make_uint4(__funnelshift_r(o[0], o[1], r), __funnelshift_r(o[1], o[2], r), __funnelshift_r(o[2], o[3], r),
                      __funnelshift_r(o[3], o[4], r));
}

// Bytes [lo, hi) of v into the 16-byte aligned slot g, in the widest stores their alignment allows.
__device__ __forceinline__ void store_part(char* g, const uint4& v, int lo, int hi) {
    const uint64_t h0 = uint64_t{v.x} | uint64_t{v.y} << 32, h1 = uint64_t{v.z} | uint64_t{v.w} << 32;
    while (lo < hi) {
        const int at = lo & 7;
        const uint64_t bits = (lo < 8 ? h0 : h1) >> (8 * at);
        if (at == 0 && lo + 8 <= hi) {
            *reinterpret_cast<uint64_t*>(g + lo) = bits;
            lo += 8;
        } else if ((at & 3) == 0 && lo + 4 <= hi) {
            *reinterpret_cast<uint32_t*>(g + lo) = static_cast<uint32_t>(bits);
            lo += 4;
        } else if ((at & 1) == 0 && lo + 2 <= hi) {
            *reinterpret_cast<uint16_t*>(g + lo) = static_cast<uint16_t>(bits);
            lo += 2;
        } else {
            *reinterpret_cast<uint8_t*>(g + lo) = static_cast<uint8_t>(bits);
            lo += 1;
        }
    }
}

template <int Width>
__device__ __forceinline__ uint4 shfl_down4(const uint4& v) {
    return make_uint4(__shfl_down_sync(0xffffffffu, v.x, 1, Width), __shfl_down_sync(0xffffffffu, v.y, 1, Width),
                      __shfl_down_sync(0xffffffffu, v.z, 1, Width), __shfl_down_sync(0xffffffffu, v.w, 1, Width));
}
template <int Width>
__device__ __forceinline__ uint4 shfl_up4(const uint4& v) {
    return make_uint4(__shfl_up_sync(0xffffffffu, v.x, 1, Width), __shfl_up_sync(0xffffffffu, v.y, 1, Width),
                      __shfl_up_sync(0xffffffffu, v.z, 1, Width), __shfl_up_sync(0xffffffffu, v.w, 1, Width));
}

// The shifted transpose (kShiftTiles in copy_abi.h): the vector transpose's tile and strips, any
// alignment. A tile row piece (src row i0 + r from column j0, `sh` bytes past a 16-byte boundary)
// is read as the aligned chunks that cover it; chunk c of the piece is bytes [sh, sh + 16) of
// aligned chunks c and c + 1, the latter the next lane's (CJ lanes read one row piece), the last
// lane's read by itself. A dst row piece (`u` bytes past a boundary) is written as the aligned
// slots that cover it: slot ib is the previous lane's last u bytes then this lane's first 16 - u
// (8 lanes write one row piece's 8 vectors); a group's first lane leaves the slot's head to the
// previous group's last lane, which writes its own tail into the next slot. Only the bytes of
// the piece are stored, so neighbouring tiles share a slot without writing each other's bytes.
template <int E, int TI, int TJ, int NT, bool IFirst>
__device__ __forceinline__ void stiled(const TiledArgs& p) {
    constexpr int V = 16 / E;
    constexpr int CJ = TJ / V;  // chunks per tile row
    constexpr int MI = TI / V;  // strips down I
    constexpr int kLoads = TI * CJ / NT;
    constexpr int kBatch = kLoads < 2 ? kLoads : 2;  // more spills past the 64 registers of 4 blocks
    using S = Strip<E>;
    constexpr int kWordsPerChunk = 16 / S::W;
    constexpr int kLanesJ = 4;
    constexpr int kStrips = MI * CJ * kWordsPerChunk / NT;
    static_assert(CJ % 8 == 0 && CJ <= 32 && MI % 8 == 0 && TI * CJ % NT == 0 && kLoads % kBatch == 0);
    static_assert(MI * CJ * kWordsPerChunk % NT == 0 && CJ * kWordsPerChunk % kLanesJ == 0 && NT % 32 == 0);
    STRIDEX_DYNAMIC_SHARED(uint4, tile);  // TI * CJ chunks
    const int t = threadIdx.x;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    auto slot = [](int r, int c) { return r * CJ + (c ^ ((r / V) & 7)); };
    for (int64_t b = blockIdx.x; b < p.blocks; b += gridDim.x) {
        const Where w = tile_at<E, TI, TJ, IFirst>(p, b);
        const int64_t rest_j = p.nj - w.j0, rest_i = p.ni - w.i0;
        const int nj_bytes = static_cast<int>((rest_j < TJ ? rest_j : TJ) * E);  // a src row piece
        const int ni_bytes = static_cast<int>((rest_i < TI ? rest_i : TI) * E);  // a dst row piece
#pragma unroll
        for (int k0 = 0; k0 < kLoads; k0 += kBatch) {
            uint4 cur[kBatch], own_next[kBatch];
            int sh[kBatch];
#pragma unroll
            for (int k = 0; k < kBatch; ++k) {  // every load of the batch in flight before the first shuffle
                const int q = t + (k0 + k) * NT, r = q / CJ, c = q % CJ;
                const char* piece = w.s + r * p.src_i;
                sh[k] = static_cast<int>(reinterpret_cast<uintptr_t>(piece) & 15);
                const uint4* aligned = reinterpret_cast<const uint4*>(piece - sh[k]);
                const bool row = w.i0 + r < p.ni;
                const int reach = sh[k] + nj_bytes;  // bytes from the aligned start the piece spans
                cur[k] = row && 16 * c < reach ? aligned[c] : zero;
                own_next[k] = row && c == CJ - 1 && 16 * (c + 1) < reach ? aligned[c + 1] : zero;
            }
#pragma unroll
            for (int k = 0; k < kBatch; ++k) {
                const int q = t + (k0 + k) * NT, r = q / CJ, c = q % CJ;
                const uint4 from_next_lane = shfl_down4<CJ>(cur[k]);  // every lane shuffles, the last too
                const uint4 next = c == CJ - 1 ? own_next[k] : from_next_lane;
                tile[slot(r, c)] = bytes_from(cur[k], next, sh[k]);
            }
        }
        __syncthreads();
        const auto* words = reinterpret_cast<const typename S::Word*>(tile);  // NOLINT: the tile as words
#pragma unroll 1
        for (int k = 0; k < kStrips; ++k) {
            const int m = t + k * NT, lane = m & 31, group = m >> 5;
            const int ib = group % (MI / 8) * 8 + (lane & 7);
            const int jw = group / (MI / 8) * kLanesJ + (lane >> 3);
            uint4 out[S::N];
            gather_strip<E, CJ>(words, ib, jw, out);
            const bool first = (lane & 7) == 0, last_lane = (lane & 7) == 7;
            const int lo = 16 * ib;  // this vector's first byte in its dst row piece
#pragma unroll
            for (int x = 0; x < S::N; ++x) {
                const uint4 prev = shfl_up4<8>(out[x]);
                if (w.j0 + int64_t{jw} * S::N + x >= p.nj || lo >= ni_bytes) continue;
                char* const piece = w.d + int64_t{jw * S::N + x} * p.dst_j;
                const int u = static_cast<int>(reinterpret_cast<uintptr_t>(piece) & 15);
                char* const g = piece - u + lo;  // slot ib: piece bytes [lo - u, lo - u + 16)
                if (u == 0) {
                    if (lo + 16 <= ni_bytes)
                        *reinterpret_cast<uint4*>(g) = out[x];
                    else
                        store_part(g, out[x], 0, ni_bytes - lo);
                    continue;
                }
                const int from = first ? u : 0, to = ni_bytes - lo + u < 16 ? ni_bytes - lo + u : 16;
                const uint4 v = bytes_from(prev, out[x], 16 - u);
                if (from == 0 && to == 16)
                    *reinterpret_cast<uint4*>(g) = v;
                else
                    store_part(g, v, from, to);
                if (last_lane || lo + 16 >= ni_bytes) {  // the tail: slot ib + 1's first u bytes
                    const int tail = ni_bytes - (lo + 16 - u) < u ? ni_bytes - (lo + 16 - u) : u;
                    if (tail > 0) store_part(g + 16, bytes_from(out[x], zero, 16 - u), 0, tail);
                }
            }
        }
        __syncthreads();  // the next tile overwrites the buffer
    }
}

}  // namespace
}  // namespace stridex::kernels

using stridex::kernels::NarrowArgs;
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

// The element tiles: stridex_tiled_<unit>, for 4-, 8- and 16-byte units whose vectors do not line
// up. Rep (the last argument) must match tile_side() in src/cuda/copy_launch.cpp.
#define STRIDEX_TILED(B, R) \
    extern "C" __global__ void __launch_bounds__(stridex::kernels::kTile* stridex::kernels::kTileRows) \
        stridex_tiled_##B(const TiledArgs p) { \
        stridex::kernels::tiled<B, R>(p); \
    }
STRIDEX_TILED(4, 2)
STRIDEX_TILED(8, 2)
STRIDEX_TILED(16, 1)

// The vector transposes: stridex_vtiled_<unit>, shapes from kVecTiles.
#define STRIDEX_VTILED(B, S) \
    extern "C" __global__ void __launch_bounds__(stridex::kernels::kVecTiles[S].threads, \
                                                 stridex::kernels::kVecTiles[S].min_blocks) \
        stridex_vtiled_##B(const TiledArgs p) { \
        constexpr stridex::kernels::VecTile t = stridex::kernels::kVecTiles[S]; \
        stridex::kernels::vtiled<B, t.ti, t.tj, t.threads, t.async, t.i_first>(p); \
    }
STRIDEX_VTILED(1, 0)
STRIDEX_VTILED(2, 1)
STRIDEX_VTILED(4, 2)
STRIDEX_VTILED(8, 3)

// The narrow transposes: stridex_narrow_<unit>.
#define STRIDEX_NARROW(B) \
    extern "C" __global__ void __launch_bounds__(stridex::kernels::kNarrowThreads) \
        stridex_narrow_##B(const NarrowArgs p) { \
        stridex::kernels::narrow<B>(p); \
    }
STRIDEX_NARROW(1)
STRIDEX_NARROW(2)
STRIDEX_NARROW(4)
STRIDEX_NARROW(8)
STRIDEX_NARROW(16)

// The shifted transposes: stridex_stiled_<unit>, shapes from kShiftTiles.
#define STRIDEX_STILED(B, S) \
    extern "C" __global__ void __launch_bounds__(stridex::kernels::kShiftTiles[S].threads, \
                                                 stridex::kernels::kShiftTiles[S].min_blocks) \
        stridex_stiled_##B(const TiledArgs p) { \
        constexpr stridex::kernels::VecTile t = stridex::kernels::kShiftTiles[S]; \
        stridex::kernels::stiled<B, t.ti, t.tj, t.threads, t.i_first>(p); \
    }
STRIDEX_STILED(1, 0)
STRIDEX_STILED(2, 1)
