// The CUDA built-ins the copy kernels (src/cuda/kernels/copy_kernels.cu) use, for running them on the
// CPU: one std::thread per CUDA thread of a block, __syncthreads as a barrier of the block, warp
// shuffles through a per-warp exchange between two barriers of the warp (so a lane that skips a
// shuffle its warp makes hangs here as it does on a GPU), static __shared__ arrays as function
// statics and the dynamic shared memory as one buffer per block. Blocks run one after another.
#pragma once

#include <array>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

struct alignas(16) uint4 {
    std::uint32_t x, y, z, w;
};
inline uint4 make_uint4(std::uint32_t x, std::uint32_t y, std::uint32_t z, std::uint32_t w) { return {x, y, z, w}; }
struct dim3 {
    unsigned x = 0, y = 0, z = 0;
};

namespace emulation {

struct Block {
    explicit Block(unsigned threads, std::size_t shared_bytes)
        : sync(threads), lanes((threads + 31) / 32), shared((shared_bytes + 15) / 16 + 1) {
        for (unsigned w = 0; w < (threads + 31) / 32; ++w)
            warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, threads - 32 * w)));
    }
    std::barrier<> sync;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<std::array<std::uint32_t, 32>> lanes;
    std::vector<uint4> shared;
};

inline Block* block = nullptr;  // the block running now
inline thread_local unsigned linear = 0;

inline std::uint32_t shuffle(std::uint32_t v, unsigned src_lane) {
    const unsigned warp = linear / 32, lane = linear % 32;
    block->lanes[warp][lane] = v;
    block->warps[warp]->arrive_and_wait();
    const std::uint32_t out = block->lanes[warp][src_lane];
    block->warps[warp]->arrive_and_wait();
    return out;
}

}  // namespace emulation

inline thread_local dim3 threadIdx;
inline dim3 blockIdx, gridDim, blockDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define STRIDEX_DYNAMIC_SHARED(type, name) type* const name = reinterpret_cast<type*>(emulation::block->shared.data())

inline void __syncthreads() { emulation::block->sync.arrive_and_wait(); }
inline std::uint32_t __shfl_down_sync(unsigned, std::uint32_t v, unsigned delta, int width = 32) {
    const unsigned lane = emulation::linear % 32, w = static_cast<unsigned>(width);
    return emulation::shuffle(v, lane % w + delta < w ? lane + delta : lane);
}
inline std::uint32_t __shfl_up_sync(unsigned, std::uint32_t v, unsigned delta, int width = 32) {
    const unsigned lane = emulation::linear % 32, w = static_cast<unsigned>(width);
    return emulation::shuffle(v, lane % w >= delta ? lane - delta : lane);
}
inline std::uint32_t __funnelshift_r(std::uint32_t lo, std::uint32_t hi, std::uint32_t shift) {
    return static_cast<std::uint32_t>(((std::uint64_t{hi} << 32) | lo) >> (shift & 31));
}
// Byte i of the result is byte (s >> 4i) & 7 of y:x (x the low four).
inline std::uint32_t __byte_perm(std::uint32_t x, std::uint32_t y, std::uint32_t s) {
    const std::uint64_t both = (std::uint64_t{y} << 32) | x;
    std::uint32_t out = 0;
    for (unsigned i = 0; i < 4; ++i)
        out |= static_cast<std::uint32_t>((both >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return out;
}

namespace emulation {

// Runs kernel(args) on a grid of `grid` blocks of tx * ty threads with `shared_bytes` of dynamic
// shared memory.
template <typename Args>
void run(void (*kernel)(Args), unsigned grid, unsigned tx, unsigned ty, std::size_t shared_bytes, const Args& args) {
    gridDim = {grid, 1, 1};
    blockDim = {tx, ty, 1};
    for (unsigned b = 0; b < grid; ++b) {
        Block here(tx * ty, shared_bytes);
        block = &here;
        blockIdx = {b, 0, 0};
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < tx * ty; ++t)
            threads.emplace_back([&, t] {
                linear = t;
                threadIdx = {t % tx, t / tx, 0};
                kernel(args);
            });
        for (std::thread& t : threads) t.join();
        block = nullptr;
    }
}

}  // namespace emulation
