// The pinned host pool: blocks by size class (powers of two up to 1 MiB, then multiples of 2 MiB),
// each reused once the work of every stream that used it completed (memory.hpp, docs/memory.md).
#include <unistd.h>

#include <bit>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "pool_internal.hpp"
#include "stridex/cuda/memory.hpp"

namespace stridex::cuda {

using namespace pools;  // the shared blocks and pools (pool_internal.hpp)

namespace {

// Pinned blocks by size class: powers of two up to 1 MiB, then multiples of 2 MiB.
std::size_t pinned_class(std::size_t bytes) noexcept {
    constexpr std::size_t kSmall = std::size_t{1} << 20, kStep = std::size_t{2} << 20;
    if (bytes <= 4096) return 4096;
    if (bytes <= kSmall) return std::bit_ceil(bytes);
    return (bytes + kStep - 1) / kStep * kStep;
}

void release_pinned(void* context) noexcept {
    const std::unique_ptr<PinnedBlock> b(static_cast<PinnedBlock*>(context));
    if (::getpid() != b->pid) return;
    PinnedPool& pool = *b->pool;
    pool.in_use.fetch_sub(b->bytes, std::memory_order_relaxed);
    pool.live.fetch_sub(1, std::memory_order_relaxed);
    Driver& d = *b->driver;
    PinnedFree entry{b->ptr, {}};
    try {
        // An event per stream that used the block: it is reused once they all completed.
        for (const Use& u : b->uses) {
            const ContextGuard guard(d, u.ordinal);
            CUevent e = d.acquire_event(u.ordinal);
            if (d.try_call(d.raw().event_record, e, u.stream) != result::success) {
                d.release_event(u.ordinal, e);
                (void)d.try_call(d.raw().ctx_synchronize);  // cannot order it: wait, then the block is free
                continue;
            }
            entry.pending.emplace_back(e, u.ordinal);
        }
        const std::lock_guard lock(pool.mutex);
        pool.free.emplace(b->bytes, std::move(entry));
    } catch (...) {  // the driver is gone: the block goes with the process
    }
}

// True (and the events returned to the driver's pool) when every use of a cached block completed.
bool completed(Driver& d, PinnedFree& f) noexcept {
    for (const auto& [event, ordinal] : f.pending)
        if (d.try_call(d.raw().event_query, event) != result::success) return false;
    for (const auto& [event, ordinal] : f.pending) d.release_event(ordinal, event);
    f.pending.clear();
    return true;
}

// A cached block of size class `bytes` whose uses completed, or nullptr.
void* reuse_pinned(Driver& d, PinnedPool& pool, std::size_t bytes) {
    const std::lock_guard lock(pool.mutex);
    auto [lo, hi] = pool.free.equal_range(bytes);
    for (auto it = lo; it != hi; ++it) {
        if (!completed(d, it->second)) continue;
        void* p = it->second.ptr;
        pool.free.erase(it);
        return p;
    }
    return nullptr;
}

}  // namespace

void pools::free_cached_pinned(Driver& d, PinnedPool& pool, bool only_completed) {
    const std::lock_guard lock(pool.mutex);
    for (auto it = pool.free.begin(); it != pool.free.end();) {
        if (only_completed && !completed(d, it->second)) {
            ++it;
            continue;
        }
        (void)d.try_call(d.raw().mem_free_host, it->second.ptr);
        pool.reserved.fetch_sub(it->first, std::memory_order_relaxed);
        it = pool.free.erase(it);
    }
}

Allocation allocate_pinned(std::size_t bytes) {
    Driver& d = driver();
    (void)d.api();
    PinnedPool& pool = pools_of(d).pinned;
    const std::size_t size = pinned_class(bytes);
    void* p = reuse_pinned(d, pool, size);
    if (!p) {
        const ContextGuard guard(d, 0);  // portable pinned memory: any context allocates it
        // Portable: pinned for every context, so any GPU's DMA engine reads it at full speed.
        CUresult r = d.api().mem_host_alloc(&p, size, cu::kMemHostAllocPortable);
        if (r == result::out_of_memory) {
            free_cached_pinned(d, pool, /*only_completed=*/true);
            r = d.api().mem_host_alloc(&p, size, cu::kMemHostAllocPortable);
        }
        if (r == result::out_of_memory)
            fail(ErrorKind::memory, "cuda_host: out of pinned memory allocating ", bytes, " bytes (stridex's pinned ",
                 "pool holds ", pool.reserved.load(std::memory_order_relaxed), " bytes, ",
                 pool.in_use.load(std::memory_order_relaxed), " in use)");
        if (r != result::success) d.fail_call("cuMemHostAlloc", r);
        raise_max(pool.peak_reserved, pool.reserved.fetch_add(size, std::memory_order_relaxed) + size);
    }
    raise_max(pool.peak, pool.in_use.fetch_add(size, std::memory_order_relaxed) + size);
    pool.live.fetch_add(1, std::memory_order_relaxed);
    auto block = std::make_unique<PinnedBlock>();
    block->driver = &d;
    block->pool = &pool;
    block->ptr = p;
    block->bytes = size;
    block->pid = ::getpid();
    Owner owner = owner_of_block(std::move(block), &release_pinned);
    return {p, std::move(owner)};
}

bool pools::note_pinned_use(const Owner& owner, CUstream stream, int ordinal, const Owner& keep) noexcept {
    void* c = owner.callback_context(&release_pinned);
    if (!c) return false;
    auto* pinned = static_cast<PinnedBlock*>(c);
    const std::lock_guard lock(pinned->mutex);
    for (const Use& u : pinned->uses)
        if (u.stream == stream) return true;
    try {
        pinned->uses.push_back({stream, ordinal, keep});
    } catch (...) {  // no memory for the record: the block is reused after the others only
    }
    return true;
}

PoolStats pinned_pool_stats() {
    Driver& d = driver();
    (void)d.api();  // Error(cuda) saying why when there is no usable driver
    PinnedPool& p = pools_of(d).pinned;
    PoolStats s;
    s.created = p.reserved.load(std::memory_order_relaxed) > 0 || p.peak_reserved.load(std::memory_order_relaxed) > 0;
    s.in_use = p.in_use.load(std::memory_order_relaxed);
    s.peak_in_use = p.peak.load(std::memory_order_relaxed);
    s.reserved = p.reserved.load(std::memory_order_relaxed);
    s.peak_reserved = p.peak_reserved.load(std::memory_order_relaxed);
    s.allocations = p.live.load(std::memory_order_relaxed);
    return s;
}

}  // namespace stridex::cuda
