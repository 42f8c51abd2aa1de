// The pools of each Driver (pool_internal.hpp): found without a lock for the Driver used last,
// made at its first use, and retired, never destroyed, when the Driver goes.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "pool_internal.hpp"

namespace stridex::cuda {

using namespace pools;  // the shared blocks and pools (pool_internal.hpp)

namespace {

std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}
std::map<Driver*, std::unique_ptr<Pools>>& registry() {
    static auto* r = new std::map<Driver*, std::unique_ptr<Pools>>();  // never destroyed: releases at exit use it
    return *r;
}
std::atomic<Pools*> g_last{nullptr};

}  // namespace

Pools& pools::pools_of(Driver& d) {
    Pools* p = g_last.load(std::memory_order_acquire);
    if (p && p->driver == &d) return *p;
    const std::lock_guard lock(registry_mutex());
    auto& slot = registry()[&d];
    if (!slot) slot = std::make_unique<Pools>(&d);
    g_last.store(slot.get(), std::memory_order_release);
    return *slot;
}

void pools::retire_pools(Driver& d) noexcept {
    const std::lock_guard lock(registry_mutex());
    const auto it = registry().find(&d);
    if (it == registry().end()) return;
    Pools* expected = it->second.get();
    g_last.compare_exchange_strong(expected, nullptr);
    // Kept (reachable, never destroyed): blocks still alive point at its counters.
    static auto* retired = new (std::nothrow) std::vector<std::unique_ptr<Pools>>();
    try {
        if (retired) retired->push_back(std::move(it->second));
    } catch (...) {  // no memory for the record: leak it instead
        (void)it->second.release();
    }
    registry().erase(it);
}

}  // namespace stridex::cuda
