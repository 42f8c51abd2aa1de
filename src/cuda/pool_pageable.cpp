// The pageable host cache: fresh host results of 1 MiB and more, mmap'ed, kept when freed and
// page-locked with the driver where the registration policy says so (memory.hpp, docs/memory.md).
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>

#include "pool_internal.hpp"
#include "stridex/cuda/memory.hpp"

namespace stridex::cuda {

using namespace pools;  // the shared declarations (pool_internal.hpp)

namespace {

// Fresh pageable results of 1 MiB and more (View.to('cpu') of a GPU array): first-touch page
// faults, not the copy, bound a transfer into fresh memory, so freed blocks are kept (up to
// kPageableCache bytes) and handed out again, already faulted in. Blocks are mmap'ed with
// MADV_HUGEPAGE, so a fresh one faults in 2 MiB pages.
//
// A copy between a block and a GPU page-locks the whole block with the driver (cuMemHostRegister,
// portable) when the registration policy says so (pageable_pool_memory: by default once the block
// is handed out again, docs/memory.md has the measurements), and it stays registered while the
// pool keeps it: from then on the DMA engine moves it directly, at pinned speed, where foreign
// pageable memory goes through the staging buffers. The registration is undone just before the
// block is unmapped. Copies into or out of the pool's blocks still complete before returning (the
// copy engine waits for them), so a block's memory is never used by queued GPU work once its View
// is gone, and a block is reusable at once.
constexpr std::size_t kPageableCache = std::size_t{1} << 30;
constexpr unsigned kMemHostRegisterPortable = 1;  // CU_MEMHOSTREGISTER_PORTABLE

// A mapped block: cached or lent.
struct Mapped {
    std::size_t size;
    Driver* registered = nullptr;  // the driver it is registered with, if any
    bool refused = false;          // the driver refused to register it: never asked again
    std::uint64_t lent = 0;        // times handed out
    pid_t pid = 0;                 // the process that registered it (a forked child must not unregister)
};

struct PageablePool {
    std::mutex mutex;
    std::multimap<std::size_t, void*> free;   // by size class (multiples of 2 MiB)
    std::map<std::uintptr_t, Mapped> mapped;  // every block, by address
    std::atomic<std::uint64_t> in_use{0}, peak{0}, reserved{0}, peak_reserved{0}, live{0}, registered{0};
};

PageablePool& pageable_pool() {
    static auto* pool = new PageablePool();  // never destroyed: releases at exit use it
    return *pool;
}

struct PageableBlock {
    void* ptr;
    std::size_t bytes;
};

// Unregisters (where this process registered it) and unmaps a block. The pool's mutex is held.
void unmap_block(PageablePool& pool, void* p, std::size_t size) noexcept {
    const auto it = pool.mapped.find(reinterpret_cast<std::uintptr_t>(p));
    if (it != pool.mapped.end()) {
        if (Driver* d = it->second.registered) {
            pool.registered.fetch_sub(size, std::memory_order_relaxed);
            if (it->second.pid == ::getpid() && d->usable()) {
                try {
                    const ContextGuard guard(*d, 0);
                    (void)d->try_call(d->raw().mem_host_unregister, p);
                } catch (...) {  // no context (the driver is shutting down): the process ends anyway
                }
            }
        }
        pool.mapped.erase(it);
    }
    ::munmap(p, size);
    pool.reserved.fetch_sub(size, std::memory_order_relaxed);
}

void release_pageable(void* context) noexcept {
    const std::unique_ptr<PageableBlock> b(static_cast<PageableBlock*>(context));
    PageablePool& pool = pageable_pool();
    pool.in_use.fetch_sub(b->bytes, std::memory_order_relaxed);
    pool.live.fetch_sub(1, std::memory_order_relaxed);
    const std::lock_guard lock(pool.mutex);
    std::uint64_t cached = 0;
    for (const auto& [size, p] : pool.free) cached += size;
    if (cached + b->bytes <= kPageableCache) {
        pool.free.emplace(b->bytes, b->ptr);
        return;
    }
    unmap_block(pool, b->ptr, b->bytes);
}

}  // namespace

Allocation pools::allocate_pageable(std::size_t bytes) {
    constexpr std::size_t kStep = std::size_t{2} << 20;
    const std::size_t size = (bytes + kStep - 1) / kStep * kStep;
    PageablePool& pool = pageable_pool();
    void* p = nullptr;
    {
        const std::lock_guard lock(pool.mutex);
        if (auto it = pool.free.find(size); it != pool.free.end()) {
            p = it->second;
            pool.free.erase(it);
            ++pool.mapped.at(reinterpret_cast<std::uintptr_t>(p)).lent;
        }
    }
    if (!p) {
        p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) fail(ErrorKind::memory, "cpu: out of memory allocating ", bytes, " bytes");
        (void)::madvise(p, size, MADV_HUGEPAGE);  // a hint: without transparent huge pages, 4 KiB pages
        try {
            const std::lock_guard lock(pool.mutex);
            pool.mapped.emplace(reinterpret_cast<std::uintptr_t>(p), Mapped{size, nullptr, false, 1, 0});
        } catch (...) {
            ::munmap(p, size);
            throw;
        }
        raise_max(pool.peak_reserved, pool.reserved.fetch_add(size, std::memory_order_relaxed) + size);
    }
    raise_max(pool.peak, pool.in_use.fetch_add(size, std::memory_order_relaxed) + size);
    pool.live.fetch_add(1, std::memory_order_relaxed);
    auto block = std::make_unique<PageableBlock>(PageableBlock{p, size});
    Owner owner = owner_of_block(std::move(block), &release_pageable);
    return {p, std::move(owner)};
}

void pools::trim_pageable() {
    PageablePool& pageable = pageable_pool();
    const std::lock_guard lock(pageable.mutex);
    for (const auto& [size, p] : pageable.free) unmap_block(pageable, p, size);
    pageable.free.clear();
}

void pools::forget_pageable_registrations(Driver& d) noexcept {
    PageablePool& pageable = pageable_pool();
    const std::lock_guard pool_lock(pageable.mutex);
    for (auto& [address, block] : pageable.mapped)
        if (block.registered == &d) {
            block.registered = nullptr;
            pageable.registered.fetch_sub(block.size, std::memory_order_relaxed);
        }
}

namespace detail {
PooledHost pageable_pool_memory(const void* p, std::size_t bytes, HostRegister policy) {
    PageablePool& pool = pageable_pool();
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    const std::lock_guard lock(pool.mutex);
    auto it = pool.mapped.upper_bound(at);
    if (it == pool.mapped.begin()) return {};
    --it;
    Mapped& block = it->second;
    if (at + bytes > it->first + block.size) return {};
    PooledHost out{true, block.registered != nullptr};
    const bool ask = policy == HostRegister::first_use || (policy == HostRegister::on_reuse && block.lent > 1);
    if (out.registered || block.refused || !ask) return out;
    // Held under the pool's lock: once per block, and a second copy of the same block must not
    // register it twice (the driver refuses that).
    Driver& d = driver();
    const CUresult r = d.try_call(d.raw().mem_host_register, reinterpret_cast<void*>(it->first), block.size,
                                  kMemHostRegisterPortable);
    if (r != result::success) {
        block.refused = true;  // out of lockable memory, say: the staging buffers still serve it
        return out;
    }
    block.registered = &d;
    block.pid = ::getpid();
    pool.registered.fetch_add(block.size, std::memory_order_relaxed);
    out.registered = true;
    return out;
}
}  // namespace detail

PoolStats pageable_pool_stats() {
    PageablePool& p = pageable_pool();
    PoolStats s;
    s.registered = p.registered.load(std::memory_order_relaxed);
    s.in_use = p.in_use.load(std::memory_order_relaxed);
    s.peak_in_use = p.peak.load(std::memory_order_relaxed);
    s.reserved = p.reserved.load(std::memory_order_relaxed);
    s.peak_reserved = p.peak_reserved.load(std::memory_order_relaxed);
    s.allocations = p.live.load(std::memory_order_relaxed);
    s.created = s.peak_reserved > 0;
    return s;
}

}  // namespace stridex::cuda
