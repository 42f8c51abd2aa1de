#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "expect_error.hpp"
#include "stridex/host_copy.hpp"

namespace stridex {
namespace {

template <class T>
std::vector<T> iota(std::size_t n) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(i);
    return v;
}

template <class T>
View view_over(std::vector<T>& buf, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
               std::int64_t offset_elements = 0, bool readonly = false) {
    return View(buf.data(), offset_elements * static_cast<std::int64_t>(sizeof(T)), Layout(shape, strides),
                dtype_of<T>(), Device::cpu(), readonly, Owner());
}

// Reads every element of a 2-d view through its strides, in C order.
template <class T>
std::vector<T> elements(const View& v) {
    std::vector<T> out;
    auto a = v.as<const T>();
    if (v.ndim() == 0) return {a()};
    if (v.ndim() == 1) {
        for (std::int64_t i = 0; i < v.shape()[0]; ++i) out.push_back(a(i));
        return out;
    }
    for (std::int64_t i = 0; i < v.shape()[0]; ++i)
        for (std::int64_t j = 0; j < v.shape()[1]; ++j) out.push_back(a(i, j));
    return out;
}

TEST(HostCopy, ContiguousResultOfAnyLayout) {
    auto buf = iota<float>(12);
    struct Case {
        std::vector<std::int64_t> shape, strides;
        std::int64_t offset;
    };
    const Case cases[] = {
        {{3, 4}, {4, 1}, 0},   // C order
        {{4, 3}, {1, 4}, 0},   // transposed
        {{3, 4}, {-4, 1}, 8},  // rows reversed
        {{3, 4}, {4, -1}, 3},  // columns reversed
        {{2, 2}, {6, 2}, 1},   // every other element, byte offset
        {{3, 4}, {0, 1}, 0},   // broadcast rows
        {{3, 4}, {0, 0}, 5},   // one element everywhere
    };
    for (const Case& c : cases) {
        const View src = view_over(buf, c.shape, c.strides, c.offset);
        const View out = host_copy(src);
        EXPECT_TRUE(out.layout().is_c_contiguous());
        EXPECT_EQ(out.device(), Device::cpu());
        EXPECT_FALSE(out.readonly());
        EXPECT_NE(out.ptr(), src.ptr());
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(out.ptr()) % 64, 0u);
        EXPECT_EQ(elements<float>(out), elements<float>(src)) << src.layout();
    }
}

TEST(HostCopy, ZeroDimensionalAndEmpty) {
    std::vector<double> one{3.5};
    const View scalar(one.data(), 0, Layout(), dtypes::float64, Device::cpu(), true, Owner());
    const View copy = host_copy(scalar);
    EXPECT_EQ(copy.ndim(), 0);
    EXPECT_EQ(*reinterpret_cast<double*>(copy.ptr()), 3.5);
    EXPECT_FALSE(copy.readonly()) << "a copy belongs to its consumer";

    const std::int64_t shape[] = {0, 3};
    const View empty(nullptr, 0, Layout::contiguous(shape), dtypes::int32, Device::cpu(), false, Owner());
    const View e = host_copy(empty);
    EXPECT_EQ(e.size(), 0);
    EXPECT_NE(e.data(), nullptr) << "consumers dislike NULL data even when empty";
}

TEST(HostCopy, ItemSizesAndComplex) {
    auto b = iota<std::uint8_t>(10);
    EXPECT_EQ(elements<std::uint8_t>(host_copy(view_over(b, {5}, {2}))), (std::vector<std::uint8_t>{0, 2, 4, 6, 8}));
    auto s = iota<std::int16_t>(10);
    EXPECT_EQ(elements<std::int16_t>(host_copy(view_over(s, {5}, {-2}, 9))),
              (std::vector<std::int16_t>{9, 7, 5, 3, 1}));
    std::vector<std::complex<double>> c{{1, 2}, {3, 4}, {5, 6}};
    const auto out = elements<std::complex<double>>(host_copy(view_over(c, {3}, {-1}, 2)));
    EXPECT_EQ(out, (std::vector<std::complex<double>>{{5, 6}, {3, 4}, {1, 2}}));
}

TEST(HostCopy, HighRankMergesAxes) {
    auto buf = iota<std::int32_t>(2 * 3 * 4 * 5);
    // A 4-d transpose (axes reversed): nothing merges, every level of the odometer moves.
    const View src = view_over(buf, {5, 4, 3, 2}, {1, 5, 20, 60});
    const View out = host_copy(src);
    auto a = src.as<const std::int32_t, 4>();
    auto o = out.as<const std::int32_t, 4>();
    for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 4; ++j)
            for (int k = 0; k < 3; ++k)
                for (int l = 0; l < 2; ++l) ASSERT_EQ(o(i, j, k, l), a(i, j, k, l));
}

TEST(HostCopy, CopyIntoStridedDestination) {
    auto src_buf = iota<float>(6);
    std::vector<float> dst_buf(12, -1.f);
    const View src = view_over(src_buf, {2, 3}, {3, 1});
    const View dst = view_over(dst_buf, {2, 3}, {1, 4});  // Fortran-like, inside a bigger buffer
    copy_host(dst, src);
    EXPECT_EQ(elements<float>(dst), elements<float>(src));
    EXPECT_EQ(dst_buf[3], -1.f) << "elements outside the destination stay untouched";
}

TEST(HostCopy, OverlappingViewsGoThroughATemporary) {
    auto buf = iota<int>(6);
    const View all = view_over(buf, {6}, {1});
    const View reversed = view_over(buf, {6}, {-1}, 5);
    copy_host(all, reversed);  // in place reversal: a naive loop would read overwritten values
    EXPECT_EQ(buf, (std::vector<int>{5, 4, 3, 2, 1, 0}));
}

TEST(HostCopy, Refusals) {
    auto buf = iota<float>(6);
    auto other = iota<float>(6);
    const View src = view_over(buf, {6}, {1});
    auto expect_kind = [](auto&& f, ErrorKind kind) {
        try {
            f();
            ADD_FAILURE() << "expected an error";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), kind) << e.what();
        }
    };
    expect_kind([&] { copy_host(view_over(other, {6}, {1}, 0, true), src); }, ErrorKind::buffer);
    expect_kind([&] { copy_host(view_over(other, {3}, {1}), src); }, ErrorKind::value);
    std::vector<std::int32_t> ints(6);
    expect_kind([&] { copy_host(view_over(ints, {6}, {1}), src); }, ErrorKind::value);
    const View gpu(buf.data(), 0, Layout::contiguous(std::vector<std::int64_t>{6}), dtypes::float32, Device::cuda(0),
                   false, Owner());
    expect_kind([&] { (void)host_copy(gpu); }, ErrorKind::buffer);
}

// check_copy is the one precondition check of every copy: copy_host runs it, and so does the copy
// engine (stridex::copy), so both refuse with these words.
TEST(CopyCheck, OneSetOfWordsForEveryCopy) {
    auto buf = iota<float>(6);
    auto other = iota<float>(6);
    std::vector<std::int32_t> ints(6);
    const View src = view_over(buf, {6}, {1});
    EXPECT_ERROR(check_copy(view_over(ints, {6}, {1}), src), value,
                 "copy between different dtypes: dst is int32, src is float32 (stridex copies, it does not cast)");
    EXPECT_ERROR(check_copy(view_over(other, {3}, {1}), src), value,
                 "copy between different shapes: dst has shape (3,) with strides (1,), src has shape (6,) with "
                 "strides (1,)");
    EXPECT_ERROR(check_copy(view_over(other, {6}, {1}, 0, true), src), buffer, "cannot copy into a read-only view");
    EXPECT_ERROR(check_copy(view_over(other, {2, 3}, {0, 1}), view_over(buf, {2, 3}, {3, 1})), buffer,
                 "copy destination dst addresses one element more than once (zero or overlapping strides: shape (2, 3) "
                 "with strides (0, 1))");
    EXPECT_NO_THROW(check_copy(view_over(other, {6}, {-1}, 5), src));
    EXPECT_NO_THROW(check_copy(view_over(other, {0, 3}, {0, 1}), view_over(buf, {0, 3}, {3, 1})));  // empty
    // copy_host says the same, and refuses a destination with one place for several elements.
    EXPECT_ERROR(copy_host(view_over(other, {6}, {1}, 0, true), src), buffer, "cannot copy into a read-only view");
    EXPECT_ERROR(copy_host(view_over(other, {2, 3}, {0, 1}), view_over(buf, {2, 3}, {3, 1})), buffer, "more than once");
    const std::int64_t eight[] = {8};
    std::uint8_t packed[4] = {}, padded[8] = {};
    const Dtype int4 = Dtype::make(DtypeCode::kInt, 4);
    const View p(packed, 0, Layout::contiguous(eight), int4, Device::cpu(), false, Owner());
    const View q(padded, 0, Layout::contiguous(eight), int4, Device::cpu(), false, Owner(), /*subbyte_padded=*/true);
    EXPECT_ERROR(copy_host(q, p), unsupported, "copy between packed and padded int4 is not supported");
}

TEST(HostCopy, PackedSubbyteCopiesStorage) {
    std::vector<std::uint8_t> packed{0x21, 0x43, 0x65};  // six int4 values
    const std::int64_t shape[] = {6};
    const View v(packed.data(), 0, Layout::contiguous(shape), Dtype::make(DtypeCode::kInt, 4), Device::cpu(), false,
                 Owner());
    const View out = host_copy(v);
    EXPECT_TRUE(out.is_packed_subbyte());
    EXPECT_EQ(out.nbytes(), 3);
    EXPECT_EQ(std::memcmp(out.ptr(), packed.data(), 3), 0);
}

TEST(AllocateHost, OwnsAlignedMemory) {
    const std::int64_t shape[] = {3, 5};
    View v = allocate_host(shape, dtypes::complex64);
    EXPECT_EQ(v.nbytes(), 3 * 5 * 8);
    EXPECT_EQ(v.owner().use_count(), 1);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.ptr()) % 64, 0u);
    std::memset(v.ptr(), 0, 120);  // all of it is ours (ASan would flag an overrun)
    const std::int64_t bad[] = {-1};
    EXPECT_THROW((void)allocate_host(bad, dtypes::float32), Error);
}

}  // namespace
}  // namespace stridex
