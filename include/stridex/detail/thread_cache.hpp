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
        if (!destroyed()) {
            ThreadCache& self = instance();
            if (self.head_ != nullptr) {
                --self.count_;
                return std::exchange(self.head_, self.head_->next);
            }
        }
        return ::operator new(kBlockSize, std::align_val_t(Align));
    }

    static void deallocate(void* block) noexcept {
        if (!destroyed()) {
            ThreadCache& self = instance();
            if (self.count_ < kLimit) {
                self.head_ = ::new (block) FreeBlock{self.head_};
                ++self.count_;
                return;
            }
        }
        ::operator delete(block, std::align_val_t(Align));
    }

    ~ThreadCache() {
        destroyed() = true;
        while (head_ != nullptr) ::operator delete(std::exchange(head_, head_->next), std::align_val_t(Align));
    }

private:
    struct FreeBlock {
        FreeBlock* next;
    };
    static constexpr std::size_t kBlockSize = Size < sizeof(FreeBlock) ? sizeof(FreeBlock) : Size;
    static constexpr int kLimit = 64;

    static ThreadCache& instance() {
        thread_local ThreadCache cache;
        return cache;
    }
    // Trivially destructible, so it stays readable while other thread_locals are destroyed.
    static bool& destroyed() noexcept {
        thread_local bool flag = false;
        return flag;
    }

    FreeBlock* head_ = nullptr;
    int count_ = 0;
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
