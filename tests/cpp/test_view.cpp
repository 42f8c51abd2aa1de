#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "stridex/mdspan.hpp"
#include "stridex/view.hpp"

namespace stridex {
namespace {

View matrix(std::vector<float>& buf, std::int64_t rows, std::int64_t cols, bool readonly = false) {
    const std::int64_t shape[] = {rows, cols};
    return View(buf.data(), 0, Layout::contiguous(shape), dtypes::float32, Device::cpu(), readonly, Owner());
}

std::vector<float> iota(std::size_t n) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), 0.f);
    return v;
}

TEST(View, TypedAccessFollowsStrides) {
    auto buf = iota(12);
    View v = matrix(buf, 3, 4);
    auto a = v.as<float, 2>();
    EXPECT_EQ(a(2, 1), 9.f);
    auto t = v.transpose().as<const float, 2>();
    EXPECT_EQ(t(1, 2), 9.f);
    a(0, 0) = 42.f;
    EXPECT_EQ(buf[0], 42.f);
}

// View::unchecked (the casters' construction from a description the wheel validated) builds the
// View the checked constructor builds from the same fields.
TEST(View, UncheckedBuildsWhatTheConstructorBuilds) {
    auto buf = iota(12);
    int released = 0;
    const std::int64_t shape[] = {3, 2}, strides[] = {4, -2};
    Owner owner = Owner::from_action([&released]() noexcept { ++released; });
    const View checked(buf.data() + 2, 0, Layout(shape, strides), dtypes::float32, Device::cpu(), Writability::readonly,
                       owner);
    {
        const View v = View::unchecked(buf.data() + 2, Layout::unchecked(shape, strides), dtypes::float32,
                                       Device::cpu(), Writability::readonly, owner, /*subbyte_padded=*/true);
        EXPECT_EQ(v.ptr(), checked.ptr());
        EXPECT_EQ(v.byte_offset(), 0);
        EXPECT_EQ(v.layout(), checked.layout());
        EXPECT_EQ(v.dtype(), checked.dtype());
        EXPECT_EQ(v.device(), checked.device());
        EXPECT_EQ(v.writability(), Writability::readonly);
        EXPECT_FALSE(v.subbyte_padded());  // only sub-byte dtypes are padded, as in the constructor
        EXPECT_EQ(v.stream(), kNoStream);
        EXPECT_EQ(v.owner().identity(), owner.identity());
        EXPECT_EQ((v.as<const float, 2>()(2, 1)), 8.f);
    }
    owner.reset();
    EXPECT_EQ(released, 0);  // `checked` still holds it
}

TEST(View, TakeOwnerMovesTheKeepAliveOut) {
    auto buf = iota(4);
    int released = 0;
    const std::int64_t shape[] = {4};
    View v(buf.data(), 0, Layout::contiguous(shape), dtypes::float32, Device::cpu(), false,
           Owner::from_action([&released]() noexcept { ++released; }));
    Owner owner = std::move(v).take_owner();
    EXPECT_EQ(owner.use_count(), 1);  // moved, not shared: no count was touched
    EXPECT_FALSE(v.owner());
    owner.reset();
    EXPECT_EQ(released, 1);
}

TEST(View, SlicingMovesTheByteOffset) {
    auto buf = iota(12);
    View v = matrix(buf, 3, 4);
    View row = v.index(0, 1);
    EXPECT_EQ(row.byte_offset(), 16);
    EXPECT_EQ((row.as<float, 1>()(3)), 7.f);
    View rev = v.slice(1, Slice{std::nullopt, std::nullopt, -1});
    EXPECT_EQ(rev.strides()[1], -1);
    EXPECT_EQ((rev.as<float, 2>()(0, 0)), 3.f);
    const Span span = rev.byte_span();
    EXPECT_EQ(span.lo, -12);
    EXPECT_EQ(span.hi, 36);
}

TEST(View, ReshapeAndPermuteShareTheOwner) {
    auto buf = iota(12);
    int released = 0;
    const std::int64_t shape[] = {12};
    View flat(buf.data(), 0, Layout::contiguous(shape), dtypes::float32, Device::cpu(), false,
              Owner::from_action([&released]() noexcept { ++released; }));
    {
        const std::int64_t to[] = {3, 4};
        View m = flat.reshape(to);
        const int axes[] = {1, 0};
        View p = m.permute(axes);
        EXPECT_EQ((p.as<float, 2>()(3, 2)), 11.f);
        EXPECT_EQ(p.owner().identity(), flat.owner().identity());
        flat = View();
        EXPECT_EQ(released, 0);
    }
    EXPECT_EQ(released, 1);
}

TEST(View, TypedAccessChecksDtypeRankAndReadOnly) {
    auto buf = iota(12);
    View v = matrix(buf, 3, 4, /*readonly=*/true);
    EXPECT_THROW(v.as<double>(), Error);
    try {
        v.as<float, 2>();
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::buffer);
        EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos);
    }
    try {
        v.as<const float, 3>();
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::value);
    }
    EXPECT_EQ((v.as<const float, 2>()(1, 1)), 5.f);
}

#ifndef NDEBUG
TEST(View, DebugBuildsCheckBounds) {
    auto buf = iota(12);
    auto a = matrix(buf, 3, 4).as<float, 2>();
    try {
        a(3, 0);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::index);
        EXPECT_NE(std::string(e.what()).find("out of bounds for axis 0 with size 3"), std::string::npos);
    }
}
#endif

TEST(View, NullDataNeedsAnEmptyLayout) {
    const std::int64_t shape[] = {2};
    EXPECT_THROW(View(nullptr, 0, Layout::contiguous(shape), dtypes::float32, Device::cpu(), false, Owner()), Error);
    const std::int64_t empty[] = {0, 2};
    View v(nullptr, 0, Layout::contiguous(empty), dtypes::float32, Device::cpu(), false, Owner());
    EXPECT_EQ(v.nbytes(), 0);
}

TEST(View, PackedSubbyteViewsRefuseStridedOperations) {
    std::vector<std::uint8_t> buf(4);
    const std::int64_t shape[] = {2, 4};
    View v(buf.data(), 0, Layout::contiguous(shape), Dtype::make(DtypeCode::kFloat4_e2m1fn, 4), Device::cpu(), false,
           Owner());
    EXPECT_EQ(v.nbytes(), 4);
    EXPECT_THROW(v.index(0, 1), Error);
    EXPECT_THROW(v.transpose(), Error);
    const std::int64_t flat[] = {8};
    EXPECT_EQ(v.reshape(flat).ndim(), 1);
}

#if defined(__cpp_lib_mdspan)
TEST(View, StdMdspan) {
    auto buf = iota(12);
    auto m = to_std_mdspan<float, 2>(matrix(buf, 3, 4).transpose());
    EXPECT_EQ(m.extent(0), 4);
    EXPECT_EQ((m[1, 2]), 9.f);
}
#endif

#if defined(STRIDEX_HAS_CUDA_STD_MDSPAN)
TEST(View, CudaStdMdspanWithLayoutStride) {
    auto buf = iota(12);
    View t = matrix(buf, 3, 4).transpose();
    auto m = to_cuda_mdspan<float, 2>(t);
    EXPECT_EQ(m.extent(0), 4);
    EXPECT_EQ(m.stride(0), 1);
    EXPECT_EQ(m.stride(1), 4);
    EXPECT_EQ(m(1, 2), 9.f);
    m(0, 0) = -1.f;
    EXPECT_EQ(buf[0], -1.f);
}

TEST(View, MdspanRefusesNegativeStrides) {
    auto buf = iota(12);
    View rev = matrix(buf, 3, 4).slice(0, Slice{std::nullopt, std::nullopt, -1});
    try {
        to_cuda_mdspan<float, 2>(rev);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::unsupported);
        EXPECT_NE(std::string(e.what()).find("positive strides"), std::string::npos);
    }
}
#endif

#if defined(STRIDEX_TEST_CCCL) && !defined(STRIDEX_HAS_CUDA_STD_MDSPAN)
#error "CCCL was found by CMake but <cuda/std/mdspan> did not compile in"
#endif

// ---- Pending: work a View is ready after besides its stream (pending.hpp) -------------------------

// A Pending that only counts what is asked of it: the core carries it and never calls it.
class CountingPending final : public Pending {
public:
    mutable int orders = 0, syncs = 0;
    void order_before(std::intptr_t, Device) const override { ++orders; }
    void synchronize() const override { ++syncs; }
    bool waited_by(std::intptr_t, Device) const noexcept override { return orders > 0; }
    bool waited() const noexcept override { return orders > 0; }
};

View pending_view(const std::shared_ptr<const Pending>& pending) {
    static float data[12];
    const std::int64_t shape[] = {3, 4};
    View v(data, 0, Layout::contiguous(shape), dtypes::float32, Device::cuda(0), false, Owner());
    v.set_pending(pending);
    return v;
}

TEST(ViewPending, CopiesShareItDerivedViewsKeepItAndNothingCallsIt) {
    const auto pending = std::make_shared<const CountingPending>();
    const View v = pending_view(pending);
    const View copy = v;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the test
    EXPECT_EQ(copy.pending(), pending);
    EXPECT_EQ(v.slice(1, Slice{1, 3, 1}).pending(), pending);
    EXPECT_EQ(v.index(0, 2).pending(), pending);
    EXPECT_EQ(v.transpose().pending(), pending);
    const std::int64_t flat[] = {12};
    EXPECT_EQ(v.reshape(flat).pending(), pending);
    EXPECT_EQ(v.as_readonly().pending(), pending);
    EXPECT_EQ(v.with_writability(Writability::immutable).pending(), pending);
    EXPECT_EQ(v.stream(), kNoStream);
    EXPECT_EQ(pending.use_count(), 3);               // this test's, v's and copy's: every derived View above is gone
    EXPECT_EQ(pending->orders + pending->syncs, 0);  // carried, never waited for by the core
}

TEST(ViewPending, SetStreamReplacesItAndAFailedOneKeepsIt) {
    const auto pending = std::make_shared<const CountingPending>();
    View v = pending_view(pending);
    EXPECT_THROW(v.set_stream(std::intptr_t{0}), Error);
    EXPECT_EQ(v.pending(), pending);  // refused: the View keeps what it had
    View w = v;
    w.set_stream(StreamValue(kDefaultStream));
    EXPECT_EQ(w.pending(), nullptr);  // ready on that stream now: whoever said so ordered it first
    EXPECT_EQ(w.stream(), kDefaultStream);
    EXPECT_EQ(v.pending(), pending);  // the copy's replacement is its own
    v.set_pending(nullptr);
    EXPECT_EQ(pending.use_count(), 1);
}

}  // namespace
}  // namespace stridex
