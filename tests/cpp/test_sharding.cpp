// Block shardings (stridex/sharding.hpp): boxes, the checks of a layout with their words, chunking
// as torch.chunk, grid layouts of every kind and the plans between them, every element checked.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <sstream>
#include <vector>

#include "expect_error.hpp"
#include "stridex/sharding.hpp"

namespace {

using stridex::ErrorKind;
using stridex::testing::throws_error;
using namespace stridex::sharding;

Box box(std::vector<std::int64_t> start, std::vector<std::int64_t> stop) {
    return Box{std::move(start), std::move(stop)};
}

std::string str(const Box& b) {
    std::ostringstream out;
    out << b;
    return out.str();
}

// Every destination element written exactly once per destination shard, from a source shard
// holding the same global element: the plan's pieces checked element by element.
void expect_plan_fills(const Layout& src, const Layout& dst) {
    const auto pieces = plan(src, dst);
    std::map<std::pair<int, std::vector<std::int64_t>>, int> writes;
    for (const Piece& p : pieces) {
        const Box& from = src.shards()[static_cast<std::size_t>(p.src)].box;
        const Box& to = dst.shards()[static_cast<std::size_t>(p.dst)].box;
        ASSERT_EQ(p.src_box, relative_to(p.box, from));
        ASSERT_EQ(p.dst_box, relative_to(p.box, to));
        ASSERT_EQ(intersect(p.box, from), p.box) << str(p.box) << " outside source " << str(from);
        ASSERT_EQ(intersect(p.box, to), p.box) << str(p.box) << " outside destination " << str(to);
        // Walk the piece's elements.
        std::vector<std::int64_t> at = p.box.start;
        if (p.box.empty()) continue;
        for (;;) {
            ++writes[{p.dst, at}];
            int d = p.box.ndim();
            while (d > 0 && ++at[static_cast<std::size_t>(d - 1)] == p.box.stop[static_cast<std::size_t>(d - 1)]) {
                at[static_cast<std::size_t>(d - 1)] = p.box.start[static_cast<std::size_t>(d - 1)];
                --d;
            }
            if (d == 0) break;
        }
    }
    std::int64_t expected = 0;
    for (const Shard& s : dst.shards()) expected += s.box.volume();
    EXPECT_EQ(static_cast<std::int64_t>(writes.size()), expected);
    for (const auto& [key, n] : writes) EXPECT_EQ(n, 1);
}

TEST(Sharding, BoxesPrintIntersectAndMeasure) {
    const Box a = box({0, 2}, {4, 8});
    EXPECT_EQ(str(a), "[0:4, 2:8]");
    EXPECT_EQ(a.volume(), 24);
    EXPECT_EQ(a.shape(), (std::vector<std::int64_t>{4, 6}));
    EXPECT_EQ(intersect(a, box({2, 0}, {6, 3})), box({2, 2}, {4, 3}));
    EXPECT_FALSE(intersect(a, box({4, 0}, {6, 8})));  // touching is not meeting
    EXPECT_EQ(relative_to(box({2, 2}, {4, 3}), a), box({2, 0}, {4, 1}));
    EXPECT_TRUE(box({0, 3}, {5, 3}).empty());
    EXPECT_EQ(box({}, {}).volume(), 1);  // a 0-d box holds one element
    EXPECT_TRUE(throws_error(
        [] {
            (void)box({0, 0}, {INT64_MAX, 4}).volume();
        },
        ErrorKind::value, "holds more than 2**63 - 1 elements"));
}

TEST(Sharding, ChunksAsTorchChunk) {
    // torch.chunk(arange(10), 4): sizes 3, 3, 3, 1; arange(5) in 4: 2, 2, 1, and an empty last.
    EXPECT_EQ(chunk(10, 4, 0), (std::pair<std::int64_t, std::int64_t>{0, 3}));
    EXPECT_EQ(chunk(10, 4, 3), (std::pair<std::int64_t, std::int64_t>{9, 10}));
    EXPECT_EQ(chunk(5, 4, 2), (std::pair<std::int64_t, std::int64_t>{4, 5}));
    EXPECT_EQ(chunk(5, 4, 3), (std::pair<std::int64_t, std::int64_t>{5, 5}));
    EXPECT_EQ(chunk(0, 3, 1), (std::pair<std::int64_t, std::int64_t>{0, 0}));
    EXPECT_EQ(chunk(INT64_MAX, 2, 1).second, INT64_MAX);  // no overflow on the way
    EXPECT_EQ(chunk(INT64_MAX, INT64_MAX, INT64_MAX - 1),
              (std::pair<std::int64_t, std::int64_t>{INT64_MAX - 1, INT64_MAX}));
    EXPECT_TRUE(throws_error([] { (void)chunk(4, 0, 0); }, ErrorKind::value, "at least 1 part, found 0"));
    EXPECT_TRUE(throws_error([] { (void)chunk(4, 2, 2); }, ErrorKind::value, "chunk 2 of 2 does not exist"));
    EXPECT_TRUE(throws_error([] { (void)chunk(-1, 2, 0); }, ErrorKind::value, "found -1"));
}

TEST(Sharding, GridLayoutsOfEveryKind) {
    const Layout rows = grid_layout({10, 6}, std::vector<std::int64_t>{4}, {{0}, {1}, {2}, {3}});
    ASSERT_EQ(rows.shards().size(), 4u);
    EXPECT_EQ(rows.shards()[3].box, box({9, 0}, {10, 6}));
    const Layout cols = grid_layout({10, 6}, std::vector<std::int64_t>{1, 4}, {{0}, {1}, {2}, {3}});
    EXPECT_EQ(cols.shards()[1].box, box({0, 2}, {10, 4}));
    const Layout blocks = grid_layout({10, 6}, std::vector<std::int64_t>{2, 2}, {{0}, {1}, {2}, {3}});
    EXPECT_EQ(blocks.shards()[2].box, box({5, 0}, {10, 3}));  // row-major over the grid
    EXPECT_EQ(blocks.shards()[2].place, 2);
    const Layout replicated = grid_layout({10, 6}, std::vector<std::int64_t>{}, {{0, 1, 2, 3}});
    ASSERT_EQ(replicated.shards().size(), 4u);
    for (const Shard& s : replicated.shards()) EXPECT_EQ(s.box, replicated.full());
    // Rows replicated twice: JAX's NamedSharding over a (2, 2) mesh with P('x', None).
    const Layout mixed = grid_layout({8, 4}, std::vector<std::int64_t>{2}, {{0, 1}, {2, 3}});
    EXPECT_EQ(mixed.shards()[1].box, box({0, 0}, {4, 4}));
    EXPECT_EQ(mixed.shards()[2].box, box({4, 0}, {8, 4}));
    // More blocks than elements: empty chunks are still shards.
    const Layout thin = grid_layout({3}, std::vector<std::int64_t>{4}, {{0}, {1}, {2}, {3}});
    EXPECT_TRUE(thin.shards()[3].box.empty());
    EXPECT_TRUE(throws_error(
        [] {
            (void)grid_layout({4}, std::vector<std::int64_t>{2, 2}, {{0}, {1}, {2}, {3}});
        },
        ErrorKind::value, "a grid of 2 dimensions cannot cut the global shape (4,)"));
    EXPECT_TRUE(throws_error([] { (void)grid_layout({4}, std::vector<std::int64_t>{0}, {}); }, ErrorKind::value,
                             "at least 1 block per dimension, found (0,)"));
    EXPECT_TRUE(throws_error([] { (void)grid_layout({4}, std::vector<std::int64_t>{2}, {{0}}); }, ErrorKind::value,
                             "the grid (2,) has 2 blocks, found places for 1"));
    EXPECT_TRUE(throws_error(
        [] {
            (void)grid_layout({4}, std::vector<std::int64_t>{2}, {{0}, {}});
        },
        ErrorKind::value, "block 1 [2:4] of the grid has no place"));
    EXPECT_TRUE(throws_error(
        [] {
            (void)grid_layout({4}, std::vector<std::int64_t>{INT64_MAX, INT64_MAX}, {});
        },
        ErrorKind::value, "cannot cut"));
    EXPECT_TRUE(throws_error(
        [] {
            (void)grid_layout({4, 4}, std::vector<std::int64_t>{INT64_MAX, INT64_MAX}, {});
        },
        ErrorKind::value, "more than 2**63 - 1 blocks"));
}

TEST(Sharding, LayoutsRefuseBadShardsByName) {
    EXPECT_TRUE(throws_error(
        [] {
            Layout({4, 4}, {{box({0, 0}, {4, 4}), -1}});
        },
        ErrorKind::value, "shard 0: a place is a key >= 0, found -1"));
    EXPECT_TRUE(throws_error([] { Layout({4, -1}, {}); }, ErrorKind::value, "no negative extent, found (4, -1)"));
    EXPECT_TRUE(throws_error(
        [] {
            Layout({4, 4}, {{box({0}, {4}), 0}});
        },
        ErrorKind::value, "shard 0: expected 2 index ranges for the global shape (4, 4), found 1"));
    EXPECT_TRUE(throws_error(
        [] {
            Layout({4, 4}, {{box({0, 0}, {4, 5}), 0}});
        },
        ErrorKind::value, "shard 0: the index ranges [0:4, 0:5] leave the global shape (4, 4)"));
    EXPECT_TRUE(throws_error(
        [] {
            Layout({4, 4}, {{box({2, 0}, {1, 4}), 0}});
        },
        ErrorKind::value, "leave the global shape"));
    EXPECT_TRUE(throws_error(
        [] {
            Layout({4, 4}, {{box({0, 0}, {3, 4}), 0}, {box({2, 0}, {4, 4}), 1}});
        },
        ErrorKind::value, "shards 0 [0:3, 0:4] and 1 [2:4, 0:4] overlap without being identical"));
    EXPECT_TRUE(throws_error(
        [] {
            Layout({4, 4}, {{box({0, 0}, {2, 4}), 0}, {box({3, 0}, {4, 4}), 1}});
        },
        ErrorKind::value,
        "the shards cover 12 of the 16 elements of the global shape (4, 4); no shard holds "
        "element (2, 0)"));
    EXPECT_TRUE(throws_error(
        [] {
            Layout({4, 4}, {{box({0, 0}, {4, 2}), 0}});
        },
        ErrorKind::value, "no shard holds element (0, 2)"));
    EXPECT_TRUE(throws_error([] { Layout({3}, {}); }, ErrorKind::value, "cover 0 of the 3 elements"));
    // Identical boxes are replicas; an empty array needs no shard; a 0-d array one full box.
    EXPECT_NO_THROW(Layout({4}, {{box({0}, {4}), 0}, {box({0}, {4}), 1}}));
    EXPECT_NO_THROW(Layout({0, 4}, {}));
    EXPECT_NO_THROW(Layout({}, {{box({}, {}), 0}}));
    EXPECT_TRUE(throws_error([] { Layout({INT64_MAX, 4}, {}); }, ErrorKind::value, "more than 2**63 - 1 elements"));
}

TEST(Sharding, PlansFillEveryDestinationFromOneReplica) {
    const std::vector<std::vector<int>> four{{0}, {1}, {2}, {3}};
    const Layout rows = grid_layout({9, 7}, std::vector<std::int64_t>{4}, four);
    const Layout cols = grid_layout({9, 7}, std::vector<std::int64_t>{1, 4}, four);
    const Layout blocks = grid_layout({9, 7}, std::vector<std::int64_t>{2, 2}, four);
    const Layout replicated = grid_layout({9, 7}, std::vector<std::int64_t>{}, {{0, 1, 2, 3}});
    const Layout mixed = grid_layout({9, 7}, std::vector<std::int64_t>{2}, {{0, 1}, {2, 3}});
    for (const Layout* a : {&rows, &cols, &blocks, &replicated, &mixed})
        for (const Layout* b : {&rows, &cols, &blocks, &replicated, &mixed}) expect_plan_fills(*a, *b);
    // Row -> column over 4 places: every destination reads one piece from each source (9 rows
    // in 4 chunks leave the last row shard empty, so an 8 x 8 array here).
    const auto pieces = plan(grid_layout({8, 8}, std::vector<std::int64_t>{4}, four),
                             grid_layout({8, 8}, std::vector<std::int64_t>{1, 4}, four));
    EXPECT_EQ(pieces.size(), 16u);
    // Destination 1's pieces start at its own place, then 2, 3, 0.
    std::vector<int> order;
    for (const Piece& p : pieces)
        if (p.dst == 1) order.push_back(p.src);
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 0}));
    // From a replicated source, every destination reads its own place's replica: all local.
    for (const Piece& p : plan(replicated, blocks)) EXPECT_EQ(p.src, p.dst);
    EXPECT_TRUE(throws_error(
        [&] {
            (void)plan(rows, grid_layout({9, 8}, std::vector<std::int64_t>{4}, four));
        },
        ErrorKind::value, "the destination's global shape is (9, 8), the source's (9, 7)"));
}

TEST(Sharding, PlansSpreadReadsOverReplicas) {
    // Source replicated on places 0 and 1; destinations on places 2..5 (none shares a place with
    // a replica): reads alternate so that each replica serves half the elements.
    const Layout src({8}, {{box({0}, {8}), 0}, {box({0}, {8}), 1}});
    const Layout dst = grid_layout({8}, std::vector<std::int64_t>{4}, {{2}, {3}, {4}, {5}});
    std::map<int, std::int64_t> read;
    for (const Piece& p : plan(src, dst)) read[p.src] += p.box.volume();
    EXPECT_EQ(read[0], 4);
    EXPECT_EQ(read[1], 4);
}

TEST(Sharding, PlansOfEmptyAndZeroDimensionalArrays) {
    EXPECT_TRUE(plan(Layout({0, 4}, {}), Layout({0, 4}, {{box({0, 0}, {0, 4}), 0}})).empty());
    const auto pieces = plan(Layout({}, {{box({}, {}), 0}}), Layout({}, {{box({}, {}), 1}, {box({}, {}), 2}}));
    ASSERT_EQ(pieces.size(), 2u);
    EXPECT_EQ(pieces[1].dst, 1);
    EXPECT_EQ(pieces[1].src, 0);
    EXPECT_EQ(pieces[1].src_box, Box{});
}

}  // namespace
