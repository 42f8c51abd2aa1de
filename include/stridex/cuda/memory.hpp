// Memory stridex allocates: stream-ordered device pools, a pinned host pool, and the Allocator
// interface through which a caller's framework can supply the memory instead (docs/memory.md).
//
// Stream contract (the one rule every allocating call follows):
//   * Device memory comes from one pool per GPU (cuMemPoolCreate, release threshold UINT64_MAX so
//     freed memory stays cached), allocated with cuMemAllocFromPoolAsync on the stream that will
//     write it (the copy's stream; the legacy default stream when none is named).
//   * The last View going frees it with cuMemFreeAsync on that allocation stream, after an event
//     wait for every other stream the copy engine queued work on it (note_use). A release never
//     synchronizes the device nor waits on the host.
//   * The driver hands freed memory to another stream only once the free is ordered before the new
//     allocation (see pool_device.cpp for the reuse attributes this relies on).
//   * Every stream stridex hands the memory to (an export or import for a stream, the copy engine)
//     is noted the same way (note_use, note_use_at): the block never reaches another stream while
//     one of them may still use it.
//   * On a capturing stream the allocation is memory of the graph being captured, never a
//     memory-allocation node (which would make the graph unlaunchable a second time unless it was
//     instantiated with auto-free-on-launch): a pool block allocated on stridex's private stream,
//     kept by the graph and reused within the capture once its View is gone (pool_device.cpp).
//   * Pinned results (cuda_host) come from a pinned pool of cached cuMemHostAlloc blocks, reused
//     only after the stream work that used them (event-queried, never waited on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "stridex/cuda/driver.hpp"
#include "stridex/device.hpp"
#include "stridex/owner.hpp"

namespace stridex {

// Memory from an Allocator: the address and the Owner whose release deallocates it (stream-ordered
// for stream-ordered allocators).
struct Allocation {
    void* data = nullptr;
    Owner owner;
};

// The caller's allocator. allocate() returns at least `bytes` (> 0) bytes on `device`, usable by
// work queued on `stream` (the encoded stream of view.hpp: kDefaultStream is the legacy default
// stream). Deallocation is the returned Owner's release, on whatever thread drops the last View;
// an allocator whose memory must be freed on a stream records that stream itself. Errors are
// stridex::Error (Error(memory) for out of memory).
class Allocator {
public:
    virtual ~Allocator() = default;
    virtual Allocation allocate(std::size_t bytes, Device device, std::intptr_t stream) const = 0;
};

// stridex's own allocator (the default): the device pools for cuda:N, the pinned pool for
// cuda_host, cuMemAllocManaged for cuda_managed, for cpu the pageable pool from 1 MiB and
// allocate_host's aligned memory below.
const Allocator& pool_allocator() noexcept;

}  // namespace stridex

namespace stridex::cuda {

// One pool's bytes. For a device pool: in_use/peak_in_use count the bytes stridex handed out and
// not yet freed; reserved/peak_reserved are the driver's (CU_MEMPOOL_ATTR_RESERVED_MEM_*), what
// the pool holds from the GPU. For the pinned pool: reserved is every cached or lent block.
struct PoolStats {
    std::uint64_t in_use = 0;
    std::uint64_t peak_in_use = 0;
    std::uint64_t reserved = 0;
    std::uint64_t peak_reserved = 0;
    std::uint64_t allocations = 0;  // live allocations
    bool created = false;           // false until the first allocation made the pool
    bool shareable = false;         // device pools: made with a POSIX fd handle type
    std::string not_shareable;      // why not, when created and not shareable
    std::uint64_t registered = 0;   // the pageable pool: bytes of its blocks page-locked with the driver
};

// `bytes` of device memory of GPU `ordinal` from its pool, ordered on `stream` (a driver handle;
// the device's primary context must be current). Error(memory) naming the device, the bytes asked
// and what the pool holds when the GPU is out of memory (the pool is trimmed and the allocation
// retried once first); Error(cuda) for an invalid stream.
Allocation allocate_device(std::size_t bytes, int ordinal, CUstream stream);
// `bytes` of portable pinned host memory from the pinned pool.
Allocation allocate_pinned(std::size_t bytes);

// Tells the pool that work on `stream` (of GPU `ordinal`) uses the memory `owner` keeps alive, so
// that its release waits for that work (an event recorded on `stream` at the release, waited for by
// the freeing stream; no host block). Once per stream and block. `keep`, where given, keeps the
// stream alive until then (a handle recorded after its stream was destroyed is undefined: without
// `keep` the caller must keep the stream alive while the memory lives, as for the allocation
// stream). Returns whether `owner` keeps memory of a pool alive (a device or the pinned pool's
// block); no effect for other memory.
bool note_use(const Owner& owner, CUstream stream, int ordinal, const Owner& keep = {}) noexcept;
// The same for the pool block that holds `data` on GPU `ordinal`, whatever owner keeps it alive (a
// torch tensor made from a View of pool memory). No effect when no block of the pool holds it.
void note_use_at(const void* data, CUstream stream, int ordinal, const Owner& keep = {}) noexcept;
// Whether a block of GPU `ordinal`'s pool holds `data` (the sanitizer: such memory's reuse is
// ordered by the pool).
bool in_pool(const void* data, int ordinal) noexcept;

PoolStats device_pool_stats(int ordinal);
PoolStats pinned_pool_stats();
// Returns the cached (unused) memory of GPU `ordinal`'s pool to the driver (cuMemPoolTrimTo 0).
void trim_device_pool(int ordinal);
// Frees the host pools' cached blocks: the pinned pool's whose last use has completed, and every
// cached block of the pageable pool (fresh cpu results of 1 MiB and more, kept for reuse).
void trim_host_pools();
// The pageable pool (cpu results of 1 MiB and more: mmap'ed with MADV_HUGEPAGE, up to 1 GiB of
// freed blocks kept faulted-in for the next result, page-locked with the driver when reused for a
// copy with a GPU: `registered` counts those bytes).
PoolStats pageable_pool_stats();

// For ipc.hpp: the pool memory an owner keeps alive, when it is a device pool's.
struct PoolMemory {
    CUdeviceptr base = 0;
    std::size_t bytes = 0;
    int ordinal = 0;
    CUmemoryPool pool = nullptr;
    bool shareable = false;
    std::string_view not_shareable;  // why not, when not shareable (the pool's own string)
};
std::optional<PoolMemory> pool_memory_of(const Owner& owner) noexcept;

namespace detail {
// Whether `owner` is a lease of memory the graph of capture `capture` owns (an allocation made while
// that capture ran, pool_device.cpp): the graph keeps that memory itself, so the lease must not be kept
// alive by it too (keep_alive_in_capture), else the memory could not be reused inside the capture.
bool owned_by_capture(const Owner& owner, unsigned long long capture) noexcept;

// Drops the bookkeeping of a Driver's pools (~Driver calls it: a test's DriverOverride ends, and
// a later Driver at the same address must not find them). Blocks still alive then leak.
void forget_pools(Driver& d) noexcept;

// For the copy engine: whether [p, p + bytes) lies in a block of the pageable pool, and whether
// that block is page-locked with the driver (cuMemHostRegister), which lets the DMA engine move it
// directly. `policy` says when a block not yet registered is registered by this call: at its first
// copy, only once it is handed out again (a reused block), or never. A refused registration is
// not asked again; the block then goes through the staging buffers.
enum class HostRegister { first_use, on_reuse, never };
struct PooledHost {
    bool pooled = false;
    bool registered = false;
};
PooledHost pageable_pool_memory(const void* p, std::size_t bytes, HostRegister policy);
}  // namespace detail

}  // namespace stridex::cuda
