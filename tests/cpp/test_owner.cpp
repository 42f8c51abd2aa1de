#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "stridex/owner.hpp"

namespace stridex {
namespace {

TEST(Owner, EmptyOwnerKeepsNothing) {
    Owner owner;
    EXPECT_FALSE(owner);
    EXPECT_EQ(owner.use_count(), 0);
}

TEST(Owner, CallbackRunsOnceWhenLastCopyGoes) {
    static int released = 0;
    released = 0;
    int token = 7;
    {
        Owner a = Owner::from_callback([](void* ctx) noexcept { released += *static_cast<int*>(ctx); }, &token);
        Owner b = a;
        Owner c = std::move(b);
        EXPECT_EQ(a.use_count(), 2);
        EXPECT_EQ(a.identity(), c.identity());
        a.reset();
        EXPECT_EQ(released, 0);
    }
    EXPECT_EQ(released, 7);
}

// into_callback (the caster API's hand-over): the receiver's from_callback owner takes over.
TEST(Owner, IntoCallbackHandsOverASoleCallbackItself) {
    static int released = 0;
    released = 0;
    int token = 3;
    auto release = [](void* ctx) noexcept { released += *static_cast<int*>(ctx); };
    Owner a = Owner::from_callback(release, &token);
    const Owner::Callback c = a.into_callback();
    EXPECT_FALSE(a);
    EXPECT_EQ(c.context, &token);  // the callback itself: no second level
    {
        Owner received = Owner::from_callback(c.release, c.context);
        EXPECT_EQ(released, 0);
    }
    EXPECT_EQ(released, 3);
}

TEST(Owner, IntoCallbackOfASharedOwnerHandsOverItsReference) {
    int released = 0;
    Owner a = Owner::from_action([&released]() noexcept { ++released; });
    Owner b = a;  // shared: the callback may not be taken out from under b
    const Owner::Callback c = a.into_callback();
    EXPECT_FALSE(a);
    EXPECT_EQ(c.context, b.identity());
    EXPECT_EQ(b.use_count(), 2);  // the handed-over reference still counts
    b.reset();
    EXPECT_EQ(released, 0);
    c.release(c.context);
    EXPECT_EQ(released, 1);

    // A from_callback owner shared with another holder: its reference, not its callback.
    Owner shared = Owner::from_callback([](void* ctx) noexcept { ++*static_cast<int*>(ctx); }, &released);
    Owner keep = shared;
    const Owner::Callback d = shared.into_callback();
    EXPECT_EQ(d.context, keep.identity());
    keep.reset();
    EXPECT_EQ(released, 1);
    d.release(d.context);
    EXPECT_EQ(released, 2);
}

TEST(Owner, IntoCallbackOfAnEmptyOwnerHasNothingToRelease) {
    Owner empty;
    const Owner::Callback c = empty.into_callback();
    EXPECT_EQ(c.release, nullptr);
    EXPECT_EQ(c.context, nullptr);
}

TEST(Owner, ActionRunsExactlyOnceAcrossThreads) {
    std::atomic<int> released{0};
    {
        Owner root = Owner::from_action([&released]() noexcept { released.fetch_add(1); });
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t)
            threads.emplace_back([copy = root]() mutable {
                for (int i = 0; i < 10000; ++i) {
                    Owner again = copy;
                    copy = again;
                }
            });
        for (auto& t : threads) t.join();
        EXPECT_EQ(released.load(), 0);
    }
    EXPECT_EQ(released.load(), 1);
}

TEST(Owner, LastDropRacingOnManyThreadsReleasesOnceAndSeesEveryWrite) {
    // The last reference skips the atomic decrement (owner.hpp): whichever thread drops last, the
    // action runs once and sees what every other holder wrote before dropping its copy.
    for (int round = 0; round < 20; ++round) {
        int written[4] = {0, 0, 0, 0};
        std::atomic<int> released{0}, seen{0}, ready{0};
        {
            Owner root = Owner::from_action([&]() noexcept {
                released.fetch_add(1);
                seen.store(written[0] + written[1] + written[2] + written[3]);
            });
            std::vector<std::thread> threads;
            for (int t = 0; t < 4; ++t)
                threads.emplace_back([copy = root, &written, &ready, t]() mutable {
                    ready.fetch_add(1);
                    while (ready.load() < 5) std::this_thread::yield();
                    written[t] = t + 1;
                    copy.reset();
                });
            ready.fetch_add(1);
            while (ready.load() < 5) std::this_thread::yield();
            root.reset();
            for (auto& t : threads) t.join();
        }
        ASSERT_EQ(released.load(), 1);
        ASSERT_EQ(seen.load(), 1 + 2 + 3 + 4);
    }
}

TEST(Owner, AssignmentReleasesThePreviousKeepAlive) {
    int first = 0, second = 0;
    Owner owner = Owner::from_action([&first]() noexcept { ++first; });
    owner = Owner::from_action([&second]() noexcept { ++second; });
    EXPECT_EQ(first, 1);
    EXPECT_EQ(second, 0);
    owner.reset();
    EXPECT_EQ(second, 1);
}

}  // namespace
}  // namespace stridex
