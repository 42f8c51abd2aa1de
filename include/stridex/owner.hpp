// stridex::Owner: a type-erased, reference-counted keep-alive for the memory a View points at.
//
// Copies share one count; when the last copy goes away the release action runs exactly once, on
// whichever thread dropped the last reference. The count is atomic, so Views may be copied and
// dropped from several threads at once. An empty Owner keeps nothing alive (memory the caller
// guarantees to outlive every View).
#pragma once

#include <atomic>
#include <new>
#include <type_traits>
#include <utility>

#include "stridex/detail/thread_cache.hpp"

namespace stridex {

class Owner {
public:
    Owner() noexcept = default;

    // Runs release(context) exactly once when the last reference is dropped.
    static Owner from_callback(void (*release)(void*) noexcept, void* context) {
        return Owner(new CallbackBlock(release, context));
    }

    // Runs action() exactly once when the last reference is dropped. The action must not throw:
    // it runs inside destructors.
    template <class Action>
    static Owner from_action(Action&& action) {
        using Stored = std::decay_t<Action>;
        static_assert(std::is_nothrow_invocable_v<Stored&>, "an Owner's release action must be noexcept");
        return Owner(new ActionBlock<Stored>(std::forward<Action>(action)));
    }

    Owner(const Owner& other) noexcept : block_(other.block_) { retain(); }
    Owner(Owner&& other) noexcept : block_(std::exchange(other.block_, nullptr)) {}
    Owner& operator=(Owner other) noexcept {
        std::swap(block_, other.block_);
        return *this;
    }
    ~Owner() { drop(); }

    explicit operator bool() const noexcept { return block_ != nullptr; }
    // Number of Owners sharing this keep-alive (0 when empty). For tests and diagnostics only.
    long use_count() const noexcept { return block_ ? block_->refs.load(std::memory_order_relaxed) : 0; }
    // Identity of the shared keep-alive: equal for copies of one Owner.
    const void* identity() const noexcept { return block_; }
    // The context of an owner made by from_callback(release, context), nullptr for any other
    // owner: lets a garbage collector see what such an owner keeps alive (the Python binding
    // reports the object a View's owner references).
    void* callback_context(void (*release)(void*) noexcept) const noexcept {
        if (!block_ || block_->destroy != &CallbackBlock::run) return nullptr;
        auto* callback = static_cast<CallbackBlock*>(block_);
        return callback->release == release ? callback->context : nullptr;
    }

    void reset() noexcept {
        drop();
        block_ = nullptr;
    }

    // This reference as a plain C callback and context, for handing it across a C boundary (the
    // caster API: another module builds its own Owner from it with from_callback). The Owner is
    // empty afterwards, and release(context) must run exactly once, on any thread. The sole
    // reference to a from_callback owner hands over that callback itself, so the receiver's owner
    // runs it directly rather than through a second level; any other hands over the reference. An
    // empty Owner gives {nullptr, nullptr}: nothing to release.
    struct Callback {
        void (*release)(void*) noexcept;
        void* context;
    };
    Callback into_callback() noexcept {
        Block* block = std::exchange(block_, nullptr);
        if (!block) return {nullptr, nullptr};
        // refs == 1: no other thread holds a reference to copy from (as in drop()).
        if (block->destroy == &CallbackBlock::run && block->refs.load(std::memory_order_acquire) == 1) {
            auto* callback = static_cast<CallbackBlock*>(block);
            const Callback out{callback->release, callback->context};
            delete callback;
            return out;
        }
        return {&drop_reference, block};
    }

private:
    static void drop_reference(void* block) noexcept {
        Owner adopted(static_cast<Block*>(block));  // its destructor drops the reference
    }

    struct Block {
        std::atomic<long> refs{1};
        void (*destroy)(Block*) noexcept;
        explicit Block(void (*d)(Block*) noexcept) : destroy(d) {}
    };
    // The common owner (a C callback: DLPack deleters, Python references) comes from a per-thread
    // cache, so importing allocates nothing in steady state.
    struct CallbackBlock : Block, detail::CachedAllocation<CallbackBlock> {
        void (*release)(void*) noexcept;
        void* context;
        CallbackBlock(void (*r)(void*) noexcept, void* c) : Block(&run), release(r), context(c) {}
        static void run(Block* b) noexcept {
            auto* self = static_cast<CallbackBlock*>(b);
            self->release(self->context);
            delete self;
        }
    };
    template <class Action>
    struct ActionBlock : Block {
        Action action;
        template <class A>
        explicit ActionBlock(A&& a) : Block(&run), action(std::forward<A>(a)) {}
        static void run(Block* b) noexcept {
            auto* self = static_cast<ActionBlock*>(b);
            self->action();
            delete self;
        }
    };

    explicit Owner(Block* block) noexcept : block_(block) {}
    void retain() const noexcept {
        if (block_) block_->refs.fetch_add(1, std::memory_order_relaxed);
    }
    void drop() noexcept {
        if (!block_) return;
        // The last reference (the common case: one View, one owner) needs no atomic
        // read-modify-write: no other thread holds a reference to copy from, and the acquire load
        // synchronizes with every earlier drop's release, as the fetch_sub would.
        if (block_->refs.load(std::memory_order_acquire) == 1 ||
            // acq_rel: every write made through any reference happens-before the release action.
            block_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
            block_->destroy(block_);
    }

    Block* block_ = nullptr;
};

}  // namespace stridex
