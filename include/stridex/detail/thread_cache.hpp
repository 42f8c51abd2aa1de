// A bounded per-thread cache of fixed-size memory blocks.
//
// Import and export allocate one small block each (an owner's control block, an exported
// DLManagedTensor) and free it soon after, often on another thread (DLPack deleters run anywhere).
// Recycling through a per-thread free list makes the steady state allocation-free without locks:
// a block freed on thread B joins B's cache. Each cache holds at most kLimit blocks and is freed
// at thread exit; frees that arrive after that go straight to the heap.
#pragma once

#include <cstddef>
#include <new>
#include <utility>

namespace stridex::detail {

template <std::size_t Size, std::size_t Align = alignof(std::max_align_t)>
class ThreadCache {
public:
    static void* allocate() {
        State& s = state();
        if (s.head != nullptr) {
            --s.count;
            return std::exchange(s.head, s.head->next);
        }
        return ::operator new(kBlockSize, std::align_val_t(Align));
    }

    static void deallocate(void* block) noexcept {
        State& s = state();
        if (s.count < kLimit && !s.exited) {
            if (!s.reaper_armed) arm_reaper(s);
            s.head = ::new (block) FreeBlock{s.head};
            ++s.count;
            return;
        }
        ::operator delete(block, std::align_val_t(Align));
    }

private:
    struct FreeBlock {
        FreeBlock* next;
    };
    // Trivially constructible and destructible: reading it costs one TLS access, with no guard
    // variable or destructor registration on the hot path.
    struct State {
        FreeBlock* head;
        int count;
        bool reaper_armed;
        bool exited;  // after thread exit began: frees go straight to the heap
    };
    // Frees the cached blocks at thread exit. Armed on the first cached block of each thread.
    struct Reaper {
        ~Reaper() {
            State& s = state();
            s.exited = true;
            while (s.head != nullptr) ::operator delete(std::exchange(s.head, s.head->next), std::align_val_t(Align));
            s.count = 0;
        }
    };
    static constexpr std::size_t kBlockSize = Size < sizeof(FreeBlock) ? sizeof(FreeBlock) : Size;
    static constexpr int kLimit = 64;

    static State& state() noexcept {
        thread_local State s{};
        return s;
    }
    [[gnu::noinline]] static void arm_reaper(State& s) noexcept {
        thread_local Reaper reaper;
        (void)reaper;
        s.reaper_armed = true;
    }
};

// Class-level operator new/delete that draw from the cache: `struct X : CachedAllocation<X> {...}`.
template <class Derived>
struct CachedAllocation {
    static void* operator new(std::size_t size) {
        if (size != sizeof(Derived)) return ::operator new(size);  // a larger derived class
        return ThreadCache<sizeof(Derived), alignof(Derived)>::allocate();
    }
    static void operator delete(void* block, std::size_t size) noexcept {
        if (size != sizeof(Derived)) return ::operator delete(block);
        ThreadCache<sizeof(Derived), alignof(Derived)>::deallocate(block);
    }
};

}  // namespace stridex::detail
