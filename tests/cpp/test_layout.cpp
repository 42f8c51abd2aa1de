#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <iostream>
#include <new>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <vector>

#include "expect_error.hpp"
#include "stridex/layout.hpp"

// Allocation counting for the no-allocation test. The replacements are weak so that another test
// file of the same binary may replace these operators too without a link error; the test probes
// that counting is live and skips otherwise. All variants that pair with the replaced deletes are
// replaced, so that sanitizers see malloc matched with free.
namespace {
// volatile: compilers may assume a new-expression touches no user state (Clang drops the stores
// around it otherwise); these two must really be written and read around each allocation.
thread_local volatile bool t_counting = false;
thread_local volatile long t_allocations = 0;

void* counted_malloc(std::size_t n) noexcept {
    if (t_counting) t_allocations = t_allocations + 1;
    return std::malloc(n ? n : 1);
}
void* counted_new(std::size_t n) {
    if (void* p = counted_malloc(n)) return p;
    throw std::bad_alloc();
}
}  // namespace

[[gnu::weak]] void* operator new(std::size_t n) { return counted_new(n); }
[[gnu::weak]] void* operator new[](std::size_t n) { return counted_new(n); }
[[gnu::weak]] void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
[[gnu::weak]] void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
[[gnu::weak]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::weak]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::weak]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::weak]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::weak]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::weak]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace stridex {
namespace {

using Dims = std::vector<std::int64_t>;
using IL = std::initializer_list<std::int64_t>;

std::span<const std::int64_t> sp(IL v) { return {v.begin(), v.size()}; }
Layout L(IL shape, IL strides) { return Layout(sp(shape), sp(strides)); }
Layout C(IL shape) { return Layout::contiguous(sp(shape)); }
Dims vec(std::span<const std::int64_t> v) { return {v.begin(), v.end()}; }

// Runs f, expecting an Error of `kind` whose message contains `needle`.
template <class F>
void expect_error(ErrorKind kind, std::string_view needle, F&& f) {
    ::stridex::testing::expect_error(f, kind, needle);
}

void expect_layout(const Layout& l, const Dims& shape, const Dims& strides) {
    EXPECT_EQ(vec(l.shape()), shape) << l;
    EXPECT_EQ(vec(l.strides()), strides) << l;
}

// Brute-force model: the element offset of every index, in C order.
Dims offsets(const Layout& l) {
    Dims out;
    if (l.empty()) return out;
    std::vector<std::int64_t> idx(std::size_t(l.ndim()), 0);
    for (;;) {
        std::int64_t off = 0;
        for (int k = 0; k < l.ndim(); ++k) off += idx[k] * l.strides()[k];
        out.push_back(off);
        int k = l.ndim() - 1;
        while (k >= 0 && ++idx[k] == l.shape()[k]) idx[k--] = 0;
        if (k < 0) return out;
    }
}

// ---------------------------------------------------------------------------------------------
// Construction and validation

TEST(Layout, DefaultIsAScalar) {
    Layout l;
    EXPECT_EQ(l.ndim(), 0);
    EXPECT_EQ(l.size(), 1);
    EXPECT_FALSE(l.empty());
    EXPECT_TRUE(l.is_c_contiguous());
    EXPECT_TRUE(l.is_f_contiguous());
    EXPECT_TRUE(l.is_dense());
    EXPECT_FALSE(l.may_overlap());
    EXPECT_EQ(l.byte_span(8), (Span{0, 8}));
    EXPECT_EQ(l, Layout::contiguous({}));
}

TEST(Layout, ContiguousStridesCountZeroExtentsAsOne) {
    expect_layout(C({2, 3, 4}), {2, 3, 4}, {12, 4, 1});
    expect_layout(Layout::f_contiguous(sp({2, 3, 4})), {2, 3, 4}, {1, 2, 6});
    // As NumPy: np.empty((2, 0, 3)).strides == (24, 24, 8) for 8-byte items.
    expect_layout(C({2, 0, 3}), {2, 0, 3}, {3, 3, 1});
    expect_layout(Layout::f_contiguous(sp({2, 0, 3})), {2, 0, 3}, {1, 2, 2});
    EXPECT_EQ(C({2, 0, 3}).size(), 0);
    EXPECT_TRUE(C({2, 0, 3}).empty());
}

TEST(Layout, AccessorsTakeNegativeAxes) {
    Layout l = C({2, 3, 4});
    EXPECT_EQ(l.shape(0), 2);
    EXPECT_EQ(l.shape(-1), 4);
    EXPECT_EQ(l.stride(-3), 12);
    EXPECT_EQ(l.size(), 24);
    expect_error(ErrorKind::index, "axis 3 is out of bounds for a layout of 3 dimensions", [&] { l.shape(3); });
    expect_error(ErrorKind::index, "axis -4 is out of bounds", [&] { l.stride(-4); });
    expect_error(ErrorKind::index, "axis 0 is out of bounds for a layout of 0 dimensions", [] { Layout().shape(0); });
}

TEST(Layout, RejectsMalformedInput) {
    expect_error(ErrorKind::value, "same length, found shape (2, 3) and strides (1,)", [] { L({2, 3}, {1}); });
    expect_error(ErrorKind::value, "extents must be >= 0, found -1 at axis 1 of shape (2, -1)", [] {
        L({2, -1}, {1, 1});
    });
    expect_error(ErrorKind::value, "extents must be >= 0", [] { C({-3}); });
    Dims big(65, 1);
    expect_error(ErrorKind::value, "at most 64 dimensions, found 65", [&] { Layout(big, big); });
    expect_error(ErrorKind::value, "at most 64 dimensions, found 65", [&] { Layout::contiguous(big); });
    big.pop_back();
    EXPECT_EQ(Layout(big, big).ndim(), 64);
}

TEST(Layout, RejectsOverflowingSizeAndSpan) {
    const std::int64_t two32 = std::int64_t(1) << 32, two62 = std::int64_t(1) << 62;
    expect_error(ErrorKind::value, "shape (4294967296, 4294967296) is too large", [&] { C({two32, two32}); });
    // Zero extents count as 1, so the rule does not depend on the order of the axes.
    expect_error(ErrorKind::value, "too large", [&] { C({0, two62, 4}); });
    expect_error(ErrorKind::value, "too large", [&] { C({two62, 4, 0}); });
    EXPECT_EQ(C({two62, 1}).size(), two62);
    // 2 * 2^62 does not fit: element 2 of the axis has no int64 offset.
    expect_error(ErrorKind::value, "memory span of shape (3,) with strides (4611686018427387904,) overflows",
                 [&] { L({3}, {two62}); });
    expect_error(ErrorKind::value, "overflows", [&] { L({2, 2}, {two62, two62}); });
    // lo = INT64_MIN: hi - lo would not fit.
    expect_error(ErrorKind::value, "overflows", [&] { L({2}, {INT64_MIN}); });
    // Checked even when another axis is empty, so slicing and indexing stay safe.
    expect_error(ErrorKind::value, "overflows", [&] { L({0, 3}, {1, two62}); });
    // At the limit is fine; strides of extent-1 (and extent-0) axes are never used.
    EXPECT_EQ(L({2}, {-INT64_MAX}).ndim(), 1);
    EXPECT_EQ(L({2, 1, 0}, {INT64_MAX, INT64_MIN, INT64_MIN}).size(), 0);
}

// ---------------------------------------------------------------------------------------------
// Flags

struct FlagCase {
    Dims shape, strides;
    bool c, f, dense, broadcast, overlap;
};

TEST(Layout, FlagsFollowNumPy) {
    const FlagCase cases[] = {
        // Extents of 1 ignore their stride (np.ones((2,1,3)) with a strange middle stride).
        {{2, 1, 3}, {3, 100, 1}, true, false, true, false, false},
        {{0, 5}, {7, -3}, true, true, true, false, false},  // empty: contiguous whatever the strides
        {{5, 0}, {0, 0}, true, true, true, true, false},    // broadcast flagged, but no element to overlap
        {{1, 1}, {9, -9}, true, true, true, false, false},
        {{3, 1}, {1, 0}, true, true, true, false, false},  // np.ones((3,1)) is both C and F
        {{3}, {1}, true, true, true, false, false},
        {{3}, {2}, false, false, false, false, false},      // x[::2]
        {{3}, {-1}, false, false, true, false, false},      // x[::-1]
        {{2, 3}, {1, 2}, false, true, true, false, false},  // transposed
        {{2, 3}, {3, -1}, false, false, true, false, false},
        {{3, 2, 4}, {4, 12, 1}, false, false, true, false, false},  // permute(1, 0, 2) of (2, 3, 4)
        {{3, 4}, {0, 1}, false, false, false, true, true},          // broadcast rows
        {{1, 4}, {0, 1}, true, true, true, false, false},           // stride 0 on extent 1 is no broadcast
        {{2, 2}, {1, 1}, false, false, false, false, true},         // truly overlapping
        {{2, 2}, {3, 2}, false, false, false, false, false},        // gaps but unique: offsets 0 2 3 5
        {{3, 2}, {2, 3}, false, false, false, false, true},         // unique (0 3 2 5 4 7), flagged: interleaved
        {{2, 2}, {2, 1}, true, false, true, false, false},
    };
    for (const auto& c : cases) {
        Layout l(c.shape, c.strides);
        SCOPED_TRACE(::testing::Message() << l);
        EXPECT_EQ(l.is_c_contiguous(), c.c);
        EXPECT_EQ(l.is_f_contiguous(), c.f);
        EXPECT_EQ(l.is_dense(), c.dense);
        EXPECT_EQ(l.has_broadcast(), c.broadcast);
        EXPECT_EQ(l.may_overlap(), c.overlap);
    }
}

TEST(Layout, DenseSurvivesPermutationAndReversal) {
    Layout base = C({2, 3, 4});
    const int perms[][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (const auto& p : perms) {
        Layout l = base.permute(p);
        EXPECT_TRUE(l.is_dense()) << l;
        EXPECT_FALSE(l.may_overlap()) << l;
        Layout rev = l.slice(1, Slice{std::nullopt, std::nullopt, -1}).layout;
        EXPECT_TRUE(rev.is_dense()) << rev;
        const int four = int(std::find(l.shape().begin(), l.shape().end(), 4) - l.shape().begin());
        Layout gappy = l.slice(four, Slice{std::nullopt, std::nullopt, 2}).layout;
        EXPECT_FALSE(gappy.is_dense()) << gappy;
    }
}

// ---------------------------------------------------------------------------------------------
// Byte spans

TEST(Layout, ByteSpan) {
    EXPECT_EQ(C({2, 3}).byte_span(4), (Span{0, 24}));
    // x[::-1] of 5 doubles: element 0 is the last one; the span reaches back 4 items.
    auto [rev, off] = C({5}).slice(0, Slice{std::nullopt, std::nullopt, -1});
    EXPECT_EQ(off, 4);
    EXPECT_EQ(rev.byte_span(8), (Span{-32, 8}));
    EXPECT_EQ(L({2, 3}, {-3, 1}).byte_span(2), (Span{-6, 6}));
    EXPECT_EQ(L({3, 4}, {0, 1}).byte_span(1), (Span{0, 4}));
    EXPECT_EQ(C({0, 3}).byte_span(8), (Span{0, 0}));
    EXPECT_EQ(C({3}).byte_span(0), (Span{0, 0}));
    expect_error(ErrorKind::value, "itemsize must be >= 0, found -1", [] { C({3}).byte_span(-1); });
    const std::int64_t two62 = std::int64_t(1) << 62;
    expect_error(ErrorKind::value, "byte span of shape (4611686018427387904,) with strides (1,) and itemsize 2",
                 [&] { C({two62}).byte_span(2); });
    // Element span fits, but one item past the last element does not.
    expect_error(ErrorKind::value, "overflows", [] { L({2}, {INT64_MAX}).byte_span(1); });
    expect_error(ErrorKind::value, "overflows", [&] { L({2}, {-two62}).byte_span(4); });
}

// ---------------------------------------------------------------------------------------------
// Indexing and slicing

TEST(Layout, IndexDropsTheAxis) {
    Layout l = C({4, 5, 6});
    auto [a, off] = l.index(1, 2);
    expect_layout(a, {4, 6}, {30, 1});
    EXPECT_EQ(off, 12);
    auto [b, off_b] = l.index(-1, -1);
    expect_layout(b, {4, 5}, {30, 6});
    EXPECT_EQ(off_b, 5);
    auto [s, off_s] = C({3}).index(0, 2);
    EXPECT_EQ(s.ndim(), 0);
    EXPECT_EQ(off_s, 2);
    expect_error(ErrorKind::index, "index 7 is out of bounds for axis 1 with size 5", [&] { l.index(1, 7); });
    expect_error(ErrorKind::index, "index -6 is out of bounds for axis 1 with size 5", [&] { l.index(-2, -6); });
    expect_error(ErrorKind::index, "index 0 is out of bounds for axis 0 with size 0", [] { C({0}).index(0, 0); });
    expect_error(ErrorKind::index, "axis 3 is out of bounds", [&] { l.index(3, 0); });
    expect_error(ErrorKind::index, "index", [&] { l.index(0, INT64_MIN); });
    // The result is empty: no element addressed, offset 0.
    EXPECT_EQ(C({3, 0}).index(0, 2).offset_elements, 0);
}

struct SliceCase {
    std::int64_t n;
    std::optional<std::int64_t> start, stop;
    std::int64_t step;
    Dims picked;  // list(range(n))[start:stop:step], computed with python3
};

TEST(Layout, SliceMatchesPython) {
    const SliceCase cases[] = {
        {0, -100, -1, 100, {}},
        {0, -2, 2, 1, {}},
        {0, -6, 6, -2, {}},
        {0, 100, -100, -2, {}},
        {0, 2, -5, -100, {}},
        {0, 5, 5, -2, {}},
        {0, std::nullopt, 2, 3, {}},
        {0, std::nullopt, std::nullopt, -1, {}},
        {1, -100, -2, 1, {}},
        {1, -100, -6, -100, {}},
        {1, -6, 4, -1, {}},
        {1, 0, -1, -2, {}},
        {1, 1, std::nullopt, -1, {0}},
        {1, 2, -100, -100, {0}},
        {1, 4, -5, -3, {0}},
        {1, 5, 6, -1, {}},
        {1, std::nullopt, std::nullopt, -5, {0}},
        {5, -10, std::nullopt, 2, {0, 2, 4}},
        {5, -100, -7, 2, {}},
        {5, -100, 1, 2, {0}},
        {5, -2, 5, -3, {}},
        {5, -5, std::nullopt, 3, {0, 3}},
        {5, -7, -1, 1, {0, 1, 2, 3}},
        {5, -7, 5, 1, {0, 1, 2, 3, 4}},
        {5, 0, -100, 2, {}},
        {5, 0, 4, -1, {}},
        {5, 10, std::nullopt, -2, {4, 2, 0}},
        {5, 2, std::nullopt, -1, {2, 1, 0}},
        {5, 3, 3, 1, {}},
        {5, 4, 0, -1, {4, 3, 2, 1}},
        {5, 4, 100, 2, {4}},
        {5, 5, -5, -100, {4}},
        {5, 5, 0, -2, {4, 2}},
        {5, std::nullopt, -10, -1, {4, 3, 2, 1, 0}},
        {5, std::nullopt, 0, -3, {4, 1}},
        {5, std::nullopt, std::nullopt, -1, {4, 3, 2, 1, 0}},
        {5, std::nullopt, std::nullopt, -INT64_MAX, {4}},
        {5, std::nullopt, std::nullopt, 2, {0, 2, 4}},
        {6, -1, -1, 2, {}},
        {6, -1, -7, -2, {5, 3, 1}},
        {6, -1, std::nullopt, 2, {5}},
        {6, -2, -5, -1, {4, 3, 2}},
        {6, -5, 5, 100, {1}},
        {6, 1, -2, -3, {}},
        {6, 1, std::nullopt, 4, {1, 5}},
        {6, 100, 0, 2, {}},
        {6, 4, -1, 1, {4}},
        {6, 6, -2, -100, {5}},
        {6, std::nullopt, -6, 1, {}},
        // Extremes (Python agrees: a step of -2**63 behaves like -(2**63 - 1) here).
        {5, INT64_MIN, INT64_MAX, 1, {0, 1, 2, 3, 4}},
        {5, INT64_MAX, INT64_MIN, -1, {4, 3, 2, 1, 0}},
        {5, std::nullopt, std::nullopt, INT64_MIN, {4}},
        {5, std::nullopt, std::nullopt, INT64_MAX, {0}},
    };
    for (const auto& c : cases) {
        // A strided axis (stride 3) inside a 2-d layout, so offsets and other axes are checked too.
        Layout base = L({2, c.n}, {100, 3});
        auto [l, off] = base.slice(1, Slice{c.start, c.stop, c.step});
        SCOPED_TRACE(::testing::Message() << "n=" << c.n << " start=" << (c.start ? *c.start : 999)
                                          << " stop=" << (c.stop ? *c.stop : 999) << " step=" << c.step);
        ASSERT_EQ(l.ndim(), 2);
        EXPECT_EQ(l.shape(0), 2);
        EXPECT_EQ(l.stride(0), 100);
        ASSERT_EQ(l.shape(1), std::int64_t(c.picked.size()));
        if (c.picked.empty()) {
            EXPECT_EQ(off, 0);
            continue;
        }
        for (std::size_t k = 0; k < c.picked.size(); ++k)
            EXPECT_EQ(off + std::int64_t(k) * l.stride(1), 3 * c.picked[k]) << "k=" << k;
    }
}

TEST(Layout, SliceErrorsAndStrides) {
    expect_error(ErrorKind::value, "slice step cannot be zero", [] {
        C({3}).slice(0, Slice{std::nullopt, std::nullopt, 0});
    });
    expect_error(ErrorKind::index, "axis 1 is out of bounds", [] { C({3}).slice(1, Slice{}); });
    // Negative steps multiply the stride.
    auto [l, off] = C({4, 6}).slice(1, Slice{5, 0, -2});
    expect_layout(l, {4, 3}, {6, -2});
    EXPECT_EQ(off, 5);
    // A length-1 slice with a step whose product with the stride overflows keeps the old stride
    // (never used).
    const std::int64_t big = std::int64_t(1) << 40;
    auto [one, off_one] = L({3}, {big}).slice(0, Slice{1, std::nullopt, big});
    expect_layout(one, {1}, {big});
    EXPECT_EQ(off_one, big);
}

// ---------------------------------------------------------------------------------------------
// Axis shuffles

TEST(Layout, PermuteAndTranspose) {
    Layout l = C({2, 3, 4});
    const int p[] = {2, 0, 1};
    expect_layout(l.permute(p), {4, 2, 3}, {1, 12, 4});
    const int neg[] = {-1, 0, -2};
    expect_layout(l.permute(neg), {4, 2, 3}, {1, 12, 4});
    expect_layout(l.transpose(), {4, 3, 2}, {1, 4, 12});
    EXPECT_EQ(Layout().transpose(), Layout());
    const int dup[] = {0, 0, 1};
    expect_error(ErrorKind::value, "axes (0, 0, 1) are not a permutation of the 3 axes of a layout: axis 0 repeats",
                 [&] { l.permute(dup); });
    const int out[] = {0, 1, 3};
    expect_error(ErrorKind::value, "entry 3 is out of range", [&] { l.permute(out); });
    const int out_neg[] = {0, 1, -4};
    expect_error(ErrorKind::value, "entry -4 is out of range", [&] { l.permute(out_neg); });
    const int short_axes[] = {1, 0};
    expect_error(ErrorKind::value, "expected 3 entries, found 2", [&] { l.permute(short_axes); });
}

TEST(Layout, SqueezeAndExpand) {
    Layout l = L({1, 3, 1, 2}, {77, 2, 55, 1});
    expect_layout(l.squeeze(), {3, 2}, {2, 1});
    expect_layout(l.squeeze(2), {1, 3, 2}, {77, 2, 1});
    expect_layout(l.squeeze(-4), {3, 1, 2}, {2, 55, 1});
    expect_error(ErrorKind::value,
                 "cannot squeeze axis 1 of shape (1, 3, 1, 2) with strides (77, 2, 55, 1): "
                 "expected extent 1, found 3",
                 [&] { l.squeeze(1); });
    expect_error(ErrorKind::index, "axis 4 is out of bounds", [&] { l.squeeze(4); });
    EXPECT_EQ(C({1, 1}).squeeze().ndim(), 0);

    Layout c = C({2, 3});
    expect_layout(c.expand(0), {1, 2, 3}, {6, 3, 1});
    expect_layout(c.expand(1), {2, 1, 3}, {3, 3, 1});
    expect_layout(c.expand(2), {2, 3, 1}, {3, 1, 1});
    expect_layout(c.expand(-1), {2, 3, 1}, {3, 1, 1});
    expect_layout(c.expand(-3), {1, 2, 3}, {6, 3, 1});
    for (int axis = -3; axis <= 2; ++axis) EXPECT_EQ(c.expand(axis), Layout::contiguous(c.expand(axis).shape()));
    expect_layout(Layout().expand(0), {1}, {1});
    expect_layout(L({3}, {-2}).expand(0), {1, 3}, {-6, -2});
    expect_error(ErrorKind::index, "axis 3 is out of bounds for inserting into a layout of 2 dimensions",
                 [&] { c.expand(3); });
    expect_error(ErrorKind::index, "axis -4 is out of bounds", [&] { c.expand(-4); });
    Dims ones(64, 1);
    expect_error(ErrorKind::value, "at most 64 dimensions", [&] { Layout::contiguous(ones).expand(0); });
}

// ---------------------------------------------------------------------------------------------
// Reshape

TEST(Layout, ReshapeContiguousGivesContiguous) {
    Layout l = C({2, 3, 4});
    EXPECT_EQ(l.reshape(sp({4, 6})), C({4, 6}));
    EXPECT_EQ(l.reshape(sp({24})), C({24}));
    EXPECT_EQ(l.reshape(sp({1, 2, 1, 12, 1})), C({1, 2, 1, 12, 1}));
    EXPECT_EQ(l.reshape(sp({-1, 8})), C({3, 8}));
    EXPECT_EQ(l.reshape(sp({2, -1, 3})), C({2, 4, 3}));
    EXPECT_EQ(Layout().reshape(sp({1, 1})), C({1, 1}));
    EXPECT_EQ(C({1, 1}).reshape({}), Layout());
    EXPECT_EQ(Layout().reshape(sp({-1})), C({1}));
    // Odd strides on extent-1 axes do not get in the way.
    EXPECT_EQ(L({2, 1, 3}, {3, 100, 1}).reshape(sp({6})), C({6}));
    EXPECT_EQ(L({2, 1, 3}, {3, 100, 1}).reshape(sp({3, 2})), C({3, 2}));
}

TEST(Layout, ReshapeStridedWithoutCopy) {
    // x[::2] of 12 elements, split: stride 2 carries over to the inner axis.
    Layout every_other = C({12}).slice(0, Slice{std::nullopt, std::nullopt, 2}).layout;
    expect_layout(every_other.reshape(sp({3, 2})), {3, 2}, {4, 2});
    // (4, 3, 2)[::2]: axes 1 and 2 still merge, axis 0 does not merge with them.
    Layout rows = C({4, 3, 2}).slice(0, Slice{std::nullopt, std::nullopt, 2}).layout;
    expect_layout(rows, {2, 3, 2}, {12, 2, 1});
    expect_layout(rows.reshape(sp({2, 6})), {2, 6}, {12, 1});
    expect_layout(rows.reshape(sp({2, 2, 3})), {2, 2, 3}, {12, 3, 1});
    expect_layout(rows.reshape(sp({1, 2, 1, 6, 1})), {1, 2, 1, 6, 1}, {24, 12, 6, 1, 1});
    expect_error(ErrorKind::value,
                 "cannot reshape shape (2, 3, 2) with strides (12, 2, 1) into shape (12,) without a copy",
                 [&] { rows.reshape(sp({12})); });
    expect_error(ErrorKind::value, "without a copy", [&] { rows.reshape(sp({4, 3})); });
    // Reversed axes reshape too, with negative strides.
    Layout rev = C({6}).slice(0, Slice{std::nullopt, std::nullopt, -1}).layout;
    expect_layout(rev.reshape(sp({2, 3})), {2, 3}, {-3, -1});
    // Broadcast axes: zero strides merge with zero strides.
    expect_layout(L({2, 3}, {0, 0}).reshape(sp({6})), {6}, {0});
    expect_layout(L({3, 4}, {0, 1}).reshape(sp({3, 2, 2})), {3, 2, 2}, {0, 2, 1});
    expect_error(ErrorKind::value, "without a copy", [] { L({3, 4}, {0, 1}).reshape(sp({12})); });
}

TEST(Layout, ReshapeOfTransposedNeedsACopy) {
    Layout t = C({2, 3}).transpose();
    expect_error(ErrorKind::value, "cannot reshape shape (3, 2) with strides (1, 3) into shape (6,) without a copy",
                 [&] { t.reshape(sp({6})); });
    expect_error(ErrorKind::value, "without a copy", [&] { t.reshape(sp({2, 3})); });
    // Splitting one axis of it is fine.
    expect_layout(t.reshape(sp({3, 2, 1})), {3, 2, 1}, {1, 3, 1});
    expect_layout(C({4, 3}).transpose().reshape(sp({3, 2, 2})), {3, 2, 2}, {1, 6, 3});
    expect_error(ErrorKind::value, "without a copy", [] { C({4, 3}).transpose().reshape(sp({2, 2, 3})); });
}

TEST(Layout, ReshapeErrors) {
    Layout l = C({2, 3});
    expect_error(ErrorKind::value, "cannot reshape a layout of size 6 into shape (4, 2)", [&] {
        l.reshape(sp({4, 2}));
    });
    expect_error(ErrorKind::value, "cannot reshape a layout of size 6 into shape (4, -1)", [&] {
        l.reshape(sp({4, -1}));
    });
    expect_error(ErrorKind::value, "can only infer one extent (-1), found shape (-1, -1)", [&] {
        l.reshape(sp({-1, -1}));
    });
    expect_error(ErrorKind::value, "extents must be >= 0 or -1 (inferred), found -2", [&] { l.reshape(sp({-2, -3})); });
    // As NumPy: nothing to infer from when a known extent is 0.
    expect_error(ErrorKind::value, "cannot reshape a layout of size 0", [] { C({0, 3}).reshape(sp({0, -1})); });
    const std::int64_t two32 = std::int64_t(1) << 32;
    expect_error(ErrorKind::value, "cannot reshape", [&] { l.reshape(sp({two32, two32, 0})); });
    Dims many(65, 1);
    expect_error(ErrorKind::value, "at most 64 dimensions, found 65", [&] { l.reshape(many); });
}

TEST(Layout, ReshapeEmptyUsesContiguousStrides) {
    Layout e = L({0, 4}, {-5, 9});
    EXPECT_EQ(e.reshape(sp({2, 0, 2})), C({2, 0, 2}));
    EXPECT_EQ(e.reshape(sp({0})), C({0}));
    expect_layout(e.reshape(sp({3, 0, 5})), {3, 0, 5}, {5, 5, 1});
}

// ---------------------------------------------------------------------------------------------
// merged()

TEST(Layout, Merged) {
    expect_layout(C({2, 3, 4}).merged(), {24}, {1});
    expect_layout(Layout::f_contiguous(sp({2, 3, 4})).merged(), {2, 3, 4}, {1, 2, 6});  // order kept
    expect_layout(L({2, 1, 3}, {3, 100, 1}).merged(), {6}, {1});
    expect_layout(L({2, 3}, {-3, -1}).merged(), {6}, {-1});
    expect_layout(L({2, 3}, {0, 0}).merged(), {6}, {0});
    expect_layout(L({4, 3}, {6, 1}).merged(), {4, 3}, {6, 1});
    expect_layout(L({2, 3, 4}, {24, 8, 1}).merged(), {6, 4}, {8, 1});
    expect_layout(L({3, 0, 2}, {7, 7, 7}).merged(), {0}, {1});
    expect_layout(L({1, 1}, {5, 6}).merged(), {}, {});
    expect_layout(Layout().merged(), {}, {});
}

// ---------------------------------------------------------------------------------------------
// Storage: inline up to kInlineNdim axes, heap beyond

TEST(Layout, CopyingASmallLayoutDoesNotAllocate) {
    static_assert(sizeof(Layout) <= 144, "Layout should stay small");
    Dims shape(Layout::kInlineNdim, 2);
    Layout src = Layout::contiguous(shape);

    // Whatever the allocator: the copy's storage lies inside the object itself.
    Layout copy = src;
    auto inside = [](const Layout& l, const void* p) {
        auto* b = reinterpret_cast<const char*>(&l);
        auto* q = static_cast<const char*>(p);
        return q >= b && q < b + sizeof(Layout);
    };
    EXPECT_TRUE(inside(copy, copy.shape().data()));
    EXPECT_TRUE(inside(copy, copy.strides().data()));

    // And with the counting operator new: probe that counting is live, then count.
    static int* volatile probe_sink = nullptr;
    t_allocations = 0;
    t_counting = true;
    probe_sink = new int(1);
    const long probe = t_allocations;
    t_counting = false;
    delete probe_sink;
    if (probe != 1) GTEST_SKIP() << "operator new is replaced elsewhere in this binary; counting is off";

    const int perm[] = {7, 6, 5, 4, 3, 2, 1, 0};
    t_allocations = 0;
    t_counting = true;
    {
        Layout a = src;           // copy
        Layout b = std::move(a);  // move
        Layout c;
        c = b;             // copy-assign
        c = std::move(b);  // move-assign
        // Building and deriving small layouts does not allocate either.
        Layout d = c.permute(perm);
        Layout e = d.slice(0, Slice{std::nullopt, std::nullopt, -1}).layout;
        Layout f(e.shape(), e.strides());
        EXPECT_EQ(f.ndim(), Layout::kInlineNdim);
    }
    t_counting = false;
    EXPECT_EQ(t_allocations, 0);

    // The counter does see Layout's own allocations: one block per copy beyond kInlineNdim.
    Layout big = src.expand(0);
    static const std::int64_t* volatile seen = nullptr;
    t_allocations = 0;
    t_counting = true;
    {
        Layout a = big;
        Layout b = std::move(a);  // steals the block
        seen = b.shape().data();  // escapes, so the allocation cannot be optimized away
    }
    t_counting = false;
    EXPECT_EQ(t_allocations, 1);
    EXPECT_NE(seen, nullptr);
}

TEST(Layout, LargeLayoutsLiveOnTheHeap) {
    Dims shape(20, 1);
    shape[3] = 2;
    shape[19] = 3;
    Layout big = Layout::contiguous(shape);
    EXPECT_EQ(big.size(), 6);
    EXPECT_EQ(big.stride(3), 3);
    Layout copy = big;
    EXPECT_EQ(copy, big);
    EXPECT_NE(copy.shape().data(), big.shape().data());
    Layout moved = std::move(copy);
    EXPECT_EQ(moved, big);
    EXPECT_EQ(copy.ndim(), 0);  // NOLINT(bugprone-use-after-move): moved-from is a valid scalar
    Layout assigned = C({2});
    assigned = big;
    EXPECT_EQ(assigned, big);
    assigned = C({3});
    EXPECT_EQ(assigned, C({3}));
    assigned = std::move(moved);
    EXPECT_EQ(assigned, big);
    const Layout& alias = assigned;  // through a reference: compilers warn on a literal x = x
    assigned = alias;                // self-assignment keeps it
    EXPECT_EQ(assigned, big);

    // Crossing the inline/heap boundary in both directions.
    Dims eight(8, 2);
    Layout nine = Layout::contiguous(eight).expand(0);
    EXPECT_EQ(nine.ndim(), 9);
    EXPECT_EQ(nine.squeeze(), Layout::contiguous(eight));
    EXPECT_EQ(nine.index(1, 1).layout.ndim(), 8);
    EXPECT_EQ(big.squeeze(), C({2, 3}));
    EXPECT_EQ(big.merged(), C({6}));
    EXPECT_EQ(big.reshape(sp({6})), C({6}));
    EXPECT_EQ(C({6}).reshape(shape), big);
    EXPECT_NE(big, Layout::f_contiguous(shape));
}

TEST(Layout, PrintsAsTuples) {
    std::ostringstream out;
    out << C({2, 3}) << ' ' << C({5}) << ' ' << Layout();
    EXPECT_EQ(out.str(),
              "Layout(shape=(2, 3), strides=(3, 1)) Layout(shape=(5,), strides=(1,)) Layout(shape=(), strides=())");
}

// ---------------------------------------------------------------------------------------------
// Randomized comparison against brute force (enumerating element offsets)

class Random {
public:
    explicit Random(std::uint64_t seed) : gen_(seed) {}
    std::int64_t between(std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen_);
    }
    bool chance(int percent) { return between(0, 99) < percent; }

    // Either arbitrary small strides, or a contiguous layout put through random views.
    Layout layout() {
        const int nd = int(between(0, 5));
        Dims shape, strides;
        for (int i = 0; i < nd; ++i) shape.push_back(chance(8) ? 0 : between(1, 4));
        if (chance(40)) {
            for (int i = 0; i < nd; ++i) strides.push_back(between(-7, 7));
            return Layout(shape, strides);
        }
        Layout l = Layout::contiguous(shape);
        if (nd > 0 && chance(50)) {
            std::vector<int> p(std::size_t(nd), 0);
            for (int i = 0; i < nd; ++i) p[i] = i;
            std::shuffle(p.begin(), p.end(), gen_);
            l = l.permute(p);
        }
        for (int k = 0; k < 2 && nd > 0; ++k)
            if (chance(40)) l = l.slice(int(between(0, nd - 1)), slice()).layout;
        if (chance(20)) l = l.expand(int(between(0, l.ndim())));
        if (l.ndim() > 0 && chance(15)) {  // broadcast one axis
            Dims sh = vec(l.shape()), st = vec(l.strides());
            const auto axis = std::size_t(between(0, l.ndim() - 1));
            st[axis] = 0;
            sh[axis] = between(1, 3);
            l = Layout(sh, st);
        }
        return l;
    }
    Slice slice() {
        Slice s;
        if (chance(70)) s.start = between(-6, 6);
        if (chance(70)) s.stop = between(-6, 6);
        s.step = chance(50) ? between(1, 3) : -between(1, 3);
        return s;
    }
    // A random shape of the given size, with extent-1 axes sprinkled in; sometimes one -1.
    Dims shape_of_size(std::int64_t size) {
        Dims factors;
        if (size == 0) {
            factors.push_back(0);
            factors.push_back(between(1, 3));
        } else {
            for (std::int64_t p = 2, n = size; n > 1;) {
                if (n % p == 0) {
                    factors.push_back(p);
                    n /= p;
                } else {
                    ++p;
                }
            }
        }
        const int nd = int(between(factors.empty() ? 0 : 1, 5));
        Dims shape(std::size_t(nd), 1);
        for (std::int64_t f : factors) shape[std::size_t(between(0, nd - 1))] *= f;
        if (size == 0 && std::find(shape.begin(), shape.end(), 0) == shape.end()) shape.push_back(0);
        if (size > 0 && !shape.empty() && chance(20))
            shape[std::size_t(between(0, std::int64_t(shape.size()) - 1))] = -1;
        return shape;
    }
    std::mt19937_64& gen() { return gen_; }

private:
    std::mt19937_64 gen_;
};

// Slice model: walk Python's clamped bounds one index at a time (no length formula).
Dims picked_indices(std::int64_t n, const Slice& s) {
    Dims out;
    auto norm = [n](std::int64_t b) { return b < 0 ? b + n : b; };
    if (s.step > 0) {
        const std::int64_t lo = std::clamp<std::int64_t>(s.start ? norm(*s.start) : 0, 0, n);
        const std::int64_t hi = std::clamp<std::int64_t>(s.stop ? norm(*s.stop) : n, 0, n);
        for (std::int64_t i = lo; i < hi; i += s.step) out.push_back(i);
    } else {
        const std::int64_t hi = std::clamp<std::int64_t>(s.start ? norm(*s.start) : n - 1, -1, n - 1);
        const std::int64_t lo = std::clamp<std::int64_t>(s.stop ? norm(*s.stop) : -1, -1, n - 1);
        for (std::int64_t i = hi; i > lo; i += s.step) out.push_back(i);
    }
    return out;
}

// Can some strided layout of `shape` address `target` (C-order offsets, starting at 0)?
bool expressible(const Dims& target, const Dims& shape) {
    Layout probe = Layout::contiguous(shape);  // flat position of each index
    Dims strides(shape.size(), 0);
    for (std::size_t k = 0; k < shape.size(); ++k)
        if (shape[k] > 1) strides[k] = target[std::size_t(probe.strides()[k])];
    return offsets(Layout(shape, strides)) == target;
}

std::vector<int> axis_first(int ndim, int axis) {
    std::vector<int> order{axis};
    for (int k = 0; k < ndim; ++k)
        if (k != axis) order.push_back(k);
    return order;
}

TEST(Layout, RandomizedAgainstBruteForce) {
    Random rnd(20240611);
    int reshaped = 0, refused = 0, dense = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        const Layout l = rnd.layout();
        SCOPED_TRACE(::testing::Message() << "iteration " << iter << ": " << l);
        const Dims off = offsets(l);
        ASSERT_EQ(std::int64_t(off.size()), l.empty() ? 0 : l.size());

        // Contiguity: the C-order (resp. F-order) walk visits 0, 1, 2, ...
        Dims iota(off.size());
        for (std::size_t i = 0; i < iota.size(); ++i) iota[i] = std::int64_t(i);
        EXPECT_EQ(l.is_c_contiguous(), off == iota);
        EXPECT_EQ(l.is_f_contiguous(), offsets(l.transpose()) == iota);

        // Density and overlap: distinct offsets forming one block.
        Dims sorted = off;
        std::sort(sorted.begin(), sorted.end());
        const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
        const bool block = sorted.empty() || sorted.back() - sorted.front() + 1 == std::int64_t(sorted.size());
        EXPECT_EQ(l.is_dense(), distinct && block);
        dense += l.is_dense() && !l.empty() && !l.is_c_contiguous() && !l.is_f_contiguous();
        EXPECT_TRUE(distinct || l.may_overlap());  // conservative: never misses an overlap
        EXPECT_TRUE(!l.has_broadcast() || l.empty() || !distinct);
        EXPECT_TRUE(!l.is_dense() || !l.may_overlap());

        // Byte span: lowest element to one past the highest.
        const Span span = l.byte_span(4);
        if (sorted.empty())
            EXPECT_EQ(span, (Span{0, 0}));
        else
            EXPECT_EQ(span, (Span{4 * sorted.front(), 4 * sorted.back() + 4}));

        // merged(): same walk, no extent-1 axes, and nothing left to merge.
        const Layout m = l.merged();
        if (l.empty()) {
            EXPECT_EQ(m, C({0}));
        } else {
            EXPECT_EQ(offsets(m), off);
            for (int k = 0; k < m.ndim(); ++k) EXPECT_NE(m.shape(k), 1);
            for (int k = 0; k + 1 < m.ndim(); ++k) EXPECT_NE(m.stride(k), m.shape(k + 1) * m.stride(k + 1));
        }

        // reshape(): on success the same walk; refused only when brute force finds no strides.
        const Dims target = rnd.shape_of_size(l.size());
        try {
            const Layout r = l.reshape(target);
            ++reshaped;
            EXPECT_EQ(r.size(), l.size());
            if (l.empty()) {
                EXPECT_TRUE(r.is_c_contiguous());
            } else {
                EXPECT_EQ(offsets(r), off) << "into " << r;
            }
            if (l.is_c_contiguous()) {
                EXPECT_EQ(r, Layout::contiguous(r.shape()));
            }
        } catch (const Error& e) {
            ++refused;
            EXPECT_EQ(e.kind(), ErrorKind::value);
            Dims resolved = target;
            std::int64_t known = 1;
            for (std::int64_t x : target)
                if (x != -1) known *= x;
            for (auto& x : resolved)
                if (x == -1) x = l.size() / known;
            ASSERT_FALSE(l.empty()) << e.what();
            EXPECT_FALSE(expressible(off, resolved)) << "refused: " << e.what();
        }

        // slice(): the kept elements, in order, are the picked indices of the axis.
        if (l.ndim() > 0) {
            const int axis = int(rnd.between(0, l.ndim() - 1));
            const Slice s = rnd.slice();
            const auto [sl, so] = l.slice(axis, s);
            const Dims picked = picked_indices(l.shape(axis), s);
            ASSERT_EQ(sl.shape(axis), std::int64_t(picked.size()));
            if (!sl.empty()) {
                Dims expect;
                // Rebuild by index(): with the axis moved first, the sub-layout at each picked index.
                const std::vector<int> order = axis_first(l.ndim(), axis);
                const Layout moved = l.permute(order);
                for (std::int64_t i : picked) {
                    auto [sub, sub_off] = moved.index(0, i);
                    for (std::int64_t o : offsets(sub)) expect.push_back(o + sub_off);
                }
                Dims got;
                for (std::int64_t o : offsets(sl.permute(order))) got.push_back(o + so);
                EXPECT_EQ(got, expect);
            }
        }
    }
    std::cout << "[ stats    ] reshaped " << reshaped << ", refused " << refused << ", dense non-contiguous " << dense
              << '\n';
    // The generator must exercise both outcomes and non-trivial dense layouts.
    EXPECT_GT(reshaped, 2000);
    EXPECT_GT(refused, 500);
    EXPECT_GT(dense, 200);
}

}  // namespace
}  // namespace stridex
