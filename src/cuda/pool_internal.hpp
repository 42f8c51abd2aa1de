// What stridex's allocators share (private to the library): the blocks and pools of the device pool
// (pool_device.cpp) and of the pinned size classes (pool_pinned.cpp), the pools of each Driver
// (pool_registry.cpp), and the calls pool.cpp makes into each allocator's file. The pageable cache
// (pool_pageable.cpp) belongs to no Driver and keeps its state to itself.
//
// Fork safety is each block's: it records the process that allocated it (`pid`), and a release in
// a forked child leaves the parent's memory alone.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/memory.hpp"

namespace stridex::cuda::pools {

// A stream that used a block, with its device (events are made in the device's context).
// A stream that used a block, with its device (events are made in the device's context) and what
// keeps the stream itself alive until the release recorded its event (the stream object a Python
// caller passed; empty where only a handle was given).
struct Use {
    CUstream stream;
    int ordinal;
    Owner keep;
};

// Raises `peak` to `value` where it is lower (a statistic's high-water mark).
inline void raise_max(std::atomic<std::uint64_t>& peak, std::uint64_t value) noexcept {
    std::uint64_t seen = peak.load(std::memory_order_relaxed);
    while (seen < value && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
    }
}

struct DeviceBlock;

struct DevicePool {
    CUmemoryPool pool = nullptr;
    bool shareable = false;
    std::string not_shareable;
    std::atomic<std::uint64_t> in_use{0}, peak{0}, live{0};
    // Its blocks by address: a View whose owner is another framework's (a torch tensor made from a
    // pool View) is still found by its memory when it is handed to a stream (note_use_at).
    std::mutex blocks_mutex;
    std::map<CUdeviceptr, DeviceBlock*> blocks;
};

// One block of a device pool.
struct DeviceBlock {
    Driver* driver;
    DevicePool* pool;
    CUdeviceptr ptr;
    std::size_t bytes;
    int ordinal;
    pid_t pid;      // the process that allocated it: a forked child must never free it
    CUstream home;  // the allocation stream, on which the block is freed
    // A block allocated while a stream captured a CUDA graph belongs to that graph (capture_arena
    // below): `capture` is the capture's id, `capture_stream` the capturing stream.
    unsigned long long capture = 0;
    CUstream capture_stream = nullptr;
    std::mutex mutex;                // guards `others` and `shared_in_capture` (copies on several threads)
    std::vector<Use> others;         // further streams that used it (note_use)
    bool shared_in_capture = false;  // another stream of its capture used it: not reused in the capture
};

struct PinnedFree {
    void* ptr;
    std::vector<std::pair<CUevent, int>> pending;  // events recorded on the streams that used it, by device
};

struct PinnedPool {
    std::mutex mutex;
    std::multimap<std::size_t, PinnedFree> free;  // by size class
    std::atomic<std::uint64_t> in_use{0}, peak{0}, reserved{0}, peak_reserved{0}, live{0};
};

struct PinnedBlock {
    Driver* driver;
    PinnedPool* pool;
    void* ptr;
    std::size_t bytes;  // its size class
    pid_t pid;
    std::mutex mutex;
    std::vector<Use> uses;
};

// The pools of one Driver (the process's libcuda, or a test's DriverOverride).
struct Pools {
    Driver* driver;
    std::mutex mutex;  // guards creation of device pools
    std::vector<std::unique_ptr<DevicePool>> devices;
    std::array<std::atomic<DevicePool*>, 64> fast{};  // created pools by ordinal, read without the lock
    PinnedPool pinned;
    explicit Pools(Driver* d) : driver(d) {}
};

// An Owner that runs `release(block)` once no View holds the block; where making the Owner fails,
// the block is released at once and the error propagates (nothing leaks).
template <class Block>
Owner owner_of_block(std::unique_ptr<Block> block, void (*release)(void*) noexcept) {
    Owner owner;
    try {
        owner = Owner::from_callback(release, block.get());
    } catch (...) {
        release(block.release());
        throw;
    }
    (void)block.release();  // the owner releases it now
    return owner;
}

// The pools of `d`, made at its first use (pool_registry.cpp).
Pools& pools_of(Driver& d);
// `d` is going: its pools are retired (kept, never destroyed: blocks still alive point at their
// counters) and never found again.
void retire_pools(Driver& d) noexcept;

// pool_device.cpp: `owner` keeps a device pool block alive (its own or a capture's lease), and
// work on `stream` uses it: true, and the block's free waits for that stream. False otherwise.
bool note_device_use(const Owner& owner, CUstream stream, int ordinal, const Owner& keep) noexcept;

// pool_pinned.cpp: the same for a pinned block, reused once that stream's work completed.
bool note_pinned_use(const Owner& owner, CUstream stream, int ordinal, const Owner& keep) noexcept;
// Frees the pinned pool's cached blocks (only those whose uses completed, where asked).
void free_cached_pinned(Driver& d, PinnedPool& pool, bool only_completed);

// pool_pageable.cpp: host results of at least kPageableMin bytes come from the pageable cache.
inline constexpr std::size_t kPageableMin = std::size_t{1} << 20;
Allocation allocate_pageable(std::size_t bytes);
// Unmaps the cached pageable blocks.
void trim_pageable();
// `d` is going: the blocks registered with it stay page-locked, and it is never called again.
void forget_pageable_registrations(Driver& d) noexcept;

}  // namespace stridex::cuda::pools
