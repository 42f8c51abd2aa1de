// The copy engine on the host: the plan every path shares (stridex/detail/copy_plan.hpp), the
// checks of stridex::copy, copy_to/contiguous/to_device, and a randomised comparison with a reference
// element walk over every layout kind (negative, broadcast, sliced, permuted, up to 8-d); the stream
// order of pinned transfers against the fake driver. Device paths are tested on a GPU by
// tests/python/test_copy.py (its device cases skip without one).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "expect_error.hpp"
#include "fake_driver.hpp"
#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/detail/copy_plan.hpp"

namespace stridex {
namespace {

using detail::CopyPlan;

View over(void* data, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, Dtype dtype,
          std::int64_t offset_bytes = 0, bool readonly = false) {
    return View(data, offset_bytes, Layout(shape, strides), dtype, Device::cpu(), readonly, Owner());
}

alignas(64) std::byte g_src[1 << 16];
alignas(64) std::byte g_dst[1 << 16];

TEST(CopyPlan, ContiguousBecomesOneRun) {
    const View s = over(g_src, {4, 8}, {8, 1}, dtypes::float32);
    const View d = over(g_dst, {4, 8}, {8, 1}, dtypes::float32);
    const CopyPlan p = detail::plan_copy(d, s);
    EXPECT_EQ(p.kind, CopyPlan::Kind::contiguous);
    EXPECT_EQ(p.bytes, 128);
}

TEST(CopyPlan, ReversedOnBothSidesIsStillOneRun) {
    const View s = over(g_src, {8}, {-1}, dtypes::int16, 14);
    const View d = over(g_dst, {8}, {-1}, dtypes::int16, 14);
    const CopyPlan p = detail::plan_copy(d, s);
    EXPECT_EQ(p.kind, CopyPlan::Kind::contiguous);
    EXPECT_EQ(p.dst_offset, -14);
    EXPECT_EQ(p.src_offset, -14);
}

TEST(CopyPlan, ColumnBlockIsWidenedRows) {
    // a[:, :64] of a (16, 256) float32 array into a (16, 64) one: rows of 256 bytes, 16-byte units.
    const View s = over(g_src, {16, 64}, {256, 1}, dtypes::float32);
    const View d = over(g_dst, {16, 64}, {64, 1}, dtypes::float32);
    const CopyPlan p = detail::plan_copy(d, s);
    EXPECT_EQ(p.kind, CopyPlan::Kind::strided);
    EXPECT_EQ(p.unit, 16);
    ASSERT_EQ(p.ndim, 2);
    EXPECT_EQ(p.axes[1].extent, 16);
    EXPECT_EQ(p.axes[0].src, 1024);
    EXPECT_EQ(p.axes[0].dst, 256);
}

TEST(CopyPlan, MisalignedRowsAreNotWidened) {
    const View s = over(g_src, {16, 64}, {257, 1}, dtypes::float32, 4);
    const View d = over(g_dst, {16, 64}, {64, 1}, dtypes::float32);
    EXPECT_EQ(detail::plan_copy(d, s).unit, 4);
}

TEST(CopyPlan, TransposeIsTiledWithTheSourceAxis) {
    const View s = over(g_src, {64, 32}, {1, 64}, dtypes::float32);  // a (32, 64) array transposed
    const View d = over(g_dst, {64, 32}, {32, 1}, dtypes::float32);
    const CopyPlan p = detail::plan_copy(d, s);
    ASSERT_EQ(p.kind, CopyPlan::Kind::tiled);
    EXPECT_EQ(p.tile_axis, 0);
    EXPECT_EQ(p.unit, 4);
}

TEST(CopyPlan, OddRowsAreTiledWithoutLinedUpVectors) {
    const View odd = over(g_src, {3, 64, 31}, {2048, 1, 64}, dtypes::bfloat16);  // batched
    const View odd_dst = over(g_dst, {3, 64, 31}, {31 * 64, 31, 1}, dtypes::bfloat16);
    const CopyPlan p = detail::plan_copy(odd_dst, odd);  // dst rows of 62 bytes: shifted vectors
    ASSERT_EQ(p.kind, CopyPlan::Kind::tiled);
    EXPECT_FALSE(p.tile_vectors);
}

TEST(CopyPlan, AlignedTransposesMoveVectors) {
    // 16-byte vectors line up when both bases, every stride but the unit ones and both tile extents
    // allow them: the vector transpose then serves 1-, 2-, 4- and 8-byte units.
    const View s = over(g_src, {64, 32}, {1, 64}, dtypes::float32);
    const View d = over(g_dst, {64, 32}, {32, 1}, dtypes::float32);
    EXPECT_TRUE(detail::plan_copy(d, s).tile_vectors);
    const View sb = over(g_src, {3, 64, 32}, {2048, 1, 64}, dtypes::bfloat16);  // batched, 8-element vectors
    const View db = over(g_dst, {3, 64, 32}, {2048, 32, 1}, dtypes::bfloat16);
    EXPECT_TRUE(detail::plan_copy(db, sb).tile_vectors);
    const View s8 = over(g_src, {32, 48}, {1, 32}, dtypes::uint8);
    const View d8 = over(g_dst, {32, 48}, {48, 1}, dtypes::uint8);
    const CopyPlan p8 = detail::plan_copy(d8, s8);
    ASSERT_EQ(p8.kind, CopyPlan::Kind::tiled);
    EXPECT_TRUE(p8.tile_vectors);
    const View s16 = over(g_src, {16, 16}, {1, 16}, dtypes::complex128);
    const View d16 = over(g_dst, {16, 16}, {16, 1}, dtypes::complex128);
    const CopyPlan p16 = detail::plan_copy(d16, s16);
    ASSERT_EQ(p16.kind, CopyPlan::Kind::tiled);
    EXPECT_FALSE(p16.tile_vectors);  // a 16-byte unit is a vector already: the tiled kernel moves it
}

TEST(CopyPlan, MisalignedTransposesMoveNoVectors) {
    const View d = over(g_dst, {64, 32}, {32, 1}, dtypes::float32);
    // src's base 4 bytes past a 16-byte boundary
    EXPECT_FALSE(detail::plan_copy(d, over(g_src, {64, 32}, {1, 64}, dtypes::float32, 4)).tile_vectors);
    // src rows of 66 floats (264 bytes): every other row starts mid-vector
    EXPECT_FALSE(detail::plan_copy(d, over(g_src, {64, 32}, {1, 66}, dtypes::float32)).tile_vectors);
    // dst's rows padded to 20 floats (aligned), but the inner extent 18 is no multiple of 4 elements
    const View s18 = over(g_src, {64, 18}, {1, 64}, dtypes::float32);
    const View d18 = over(g_dst, {64, 18}, {20, 1}, dtypes::float32);
    const CopyPlan p18 = detail::plan_copy(d18, s18);
    ASSERT_EQ(p18.kind, CopyPlan::Kind::tiled);
    EXPECT_FALSE(p18.tile_vectors);
    // 1-byte units: 16-element vectors, so an extent of 24 does not line up
    const View s24 = over(g_src, {32, 24}, {1, 32}, dtypes::uint8);
    const View d24 = over(g_dst, {32, 24}, {32, 1}, dtypes::uint8);
    EXPECT_FALSE(detail::plan_copy(d24, s24).tile_vectors);
}

TEST(CopyPlan, ThinTransposePackedOnOneSideIsNarrow) {
    // (64, 2) from column-major: dst packs the short axis, src has 2 rows of 64.
    const View s = over(g_src, {64, 2}, {1, 64}, dtypes::float32);
    const View d = over(g_dst, {64, 2}, {2, 1}, dtypes::float32);
    const CopyPlan p = detail::plan_copy(d, s);
    EXPECT_EQ(p.kind, CopyPlan::Kind::narrow);
    EXPECT_TRUE(p.packed_dst);
    EXPECT_EQ(p.tile_axis, 0);
    // NHWC -> NCHW with 3 channels: src packs the short axis, dst has 3 rows per image.
    const View nhwc = over(g_src, {2, 3, 16, 32}, {3 * 16 * 32, 1, 32 * 3, 3}, dtypes::uint8);
    const View nchw = over(g_dst, {2, 3, 16, 32}, {3 * 16 * 32, 16 * 32, 32, 1}, dtypes::uint8);
    const CopyPlan q = detail::plan_copy(nchw, nhwc);
    EXPECT_EQ(q.kind, CopyPlan::Kind::narrow);
    EXPECT_FALSE(q.packed_dst);
    EXPECT_EQ(q.axes[q.tile_axis].extent, 3);
    EXPECT_EQ(q.axes[q.ndim - 1].extent, 16 * 32);
}

TEST(CopyPlan, ThinTransposeNotPackedStaysStrided) {
    // dst rows padded to 4 elements: the short axis's runs are not one contiguous run.
    const View s = over(g_src, {64, 2}, {1, 64}, dtypes::float32);
    const View d = over(g_dst, {64, 2}, {4, 1}, dtypes::float32);
    EXPECT_EQ(detail::plan_copy(d, s).kind, CopyPlan::Kind::strided);
    // Both transposed axes short: no long axis to chunk.
    const View s2 = over(g_src, {8, 3}, {1, 8}, dtypes::float32);
    const View d2 = over(g_dst, {8, 3}, {3, 1}, dtypes::float32);
    EXPECT_EQ(detail::plan_copy(d2, s2).kind, CopyPlan::Kind::strided);
}

TEST(CopyPlan, OddElementSizeSplitsIntoUnits) {
    const Dtype rgb = Dtype::from_raw(1, 8, 3);  // 3-byte elements (uint8x3)
    const View s = over(g_src, {5}, {2}, rgb);
    const View d = over(g_dst, {5}, {1}, rgb);
    const CopyPlan p = detail::plan_copy(d, s);
    EXPECT_EQ(p.unit, 1);
    ASSERT_EQ(p.ndim, 2);
    EXPECT_EQ(p.axes[1].extent, 3);
}

TEST(CopyPlan, EmptyAndScalar) {
    EXPECT_EQ(
        detail::plan_copy(over(g_dst, {0, 3}, {3, 1}, dtypes::int8), over(g_src, {0, 3}, {3, 1}, dtypes::int8)).kind,
        CopyPlan::Kind::nothing);
    const CopyPlan one = detail::plan_copy(over(g_dst, {}, {}, dtypes::float64), over(g_src, {}, {}, dtypes::float64));
    EXPECT_EQ(one.kind, CopyPlan::Kind::contiguous);
    EXPECT_EQ(one.bytes, 8);
}

TEST(Copy, RefusesWhatItCannotDo) {
    const View s = over(g_src, {4, 4}, {4, 1}, dtypes::float32);
    EXPECT_ERROR(copy(over(g_dst, {4, 4}, {4, 1}, dtypes::int32), s), value, "different dtypes");
    EXPECT_ERROR(copy(over(g_dst, {4, 3}, {3, 1}, dtypes::float32), s), value, "different shapes");
    EXPECT_ERROR(copy(over(g_dst, {4, 4}, {4, 1}, dtypes::float32, 0, true), s), buffer, "read-only");
    EXPECT_ERROR(copy(over(g_dst, {4, 4}, {0, 1}, dtypes::float32), s), buffer, "more than once");
    EXPECT_ERROR(copy(over(g_dst, {4, 4}, {1, 1}, dtypes::float32), s), buffer, "more than once");
    const View rocm(g_src, 0, Layout::contiguous(std::vector<std::int64_t>{4, 4}), dtypes::float32,
                    Device{DeviceType::kROCM, 0}, false, Owner());
    EXPECT_ERROR(copy(over(g_dst, {4, 4}, {4, 1}, dtypes::float32), rocm), unsupported, "rocm");
    // A device argument stridex cannot serve is a ValueError, as every unknown device is.
    EXPECT_ERROR(allocate(std::vector<std::int64_t>{2}, dtypes::float32, Device{DeviceType::kROCM, 0}), value,
                 "stridex allocates on cpu, cuda:N, cuda_host and cuda_managed, not rocm:0");
    EXPECT_ERROR(parse_order("X"), value, "order must be 'C', 'F' or 'K', found 'X'");
    EXPECT_ERROR(parse_order("CF"), value, "found 'CF'");
    EXPECT_ERROR(parse_order(""), value, "found ''");
}

TEST(Copy, PackedSubbyteCopiesWholeStorage) {
    const Dtype int4 = Dtype::from_raw(0, 4, 1);
    std::uint8_t in[4] = {0x21, 0x43, 0x65, 0x87}, out[4] = {};
    const View s(in, 0, Layout::contiguous(std::vector<std::int64_t>{8}), int4, Device::cpu(), false, Owner());
    const View d(out, 0, Layout::contiguous(std::vector<std::int64_t>{8}), int4, Device::cpu(), false, Owner());
    EXPECT_EQ(copy(d, s), kNoStream);
    EXPECT_EQ(std::memcmp(in, out, 4), 0);
    const View fresh = copy_to(s, s.device());
    EXPECT_EQ(std::memcmp(fresh.ptr(), in, 4), 0);
    EXPECT_TRUE(fresh.is_packed_subbyte());
    std::uint8_t padded[8] = {};
    const View p(padded, 0, Layout::contiguous(std::vector<std::int64_t>{8}), int4, Device::cpu(), false, Owner(),
                 true);
    EXPECT_ERROR(copy(p, s), unsupported, "packed and padded");
    const View square(in, 0, Layout::contiguous(std::vector<std::int64_t>{2, 4}), int4, Device::cpu(), false, Owner());
    EXPECT_ERROR(copy_to(square, square.device(), Order::F), unsupported, "must be C-contiguous");
}

// ---- randomised: every layout kind against an element-by-element reference ----------------

// A random layout of `shape` inside a buffer of `capacity` elements: each axis strided by a random
// step (sometimes negative, sometimes 0 in a source), axes permuted.
struct RandomLayout {
    std::vector<std::int64_t> strides;
    std::int64_t offset = 0;  // elements
    std::int64_t span = 1;    // elements the buffer needs
};

RandomLayout random_layout(std::mt19937& rng, const std::vector<std::int64_t>& shape, bool allow_broadcast) {
    const std::size_t n = shape.size();
    std::vector<std::size_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    RandomLayout out;
    out.strides.assign(n, 0);
    std::int64_t step = 1 + static_cast<std::int64_t>(rng() % 2);  // sometimes a gap between elements
    for (std::size_t k = n; k-- > 0;) {
        const std::size_t a = perm[k];
        if (allow_broadcast && rng() % 6 == 0) continue;  // stride 0
        out.strides[a] = step;
        step *= shape[a] + static_cast<std::int64_t>(rng() % 2);
    }
    for (std::size_t a = 0; a < n; ++a) {
        if (rng() % 4 == 0 && shape[a] > 0) {  // walk this axis backwards
            out.offset += (shape[a] - 1) * out.strides[a];
            out.strides[a] = -out.strides[a];
        }
    }
    out.span = step + out.offset + 1;
    return out;
}

template <class F>
void for_each_index(const std::vector<std::int64_t>& shape, F f) {
    for (std::int64_t e : shape)
        if (e == 0) return;
    std::vector<std::int64_t> idx(shape.size(), 0);
    for (;;) {
        f(idx);
        std::size_t a = shape.size();
        while (a > 0) {
            --a;
            if (++idx[a] < shape[a]) break;
            idx[a] = 0;
            if (a == 0) return;
        }
        if (shape.empty()) return;
    }
}

TEST(CopyRandom, EveryLayoutMatchesTheReference) {
    std::mt19937 rng(1234);
    const Dtype types[] = {dtypes::uint8,   dtypes::int16,      dtypes::float32,
                           dtypes::float64, dtypes::complex128, Dtype::from_raw(1, 8, 3)};
    for (int trial = 0; trial < 600; ++trial) {
        const Dtype dt = types[rng() % std::size(types)];
        const auto item = static_cast<std::size_t>(dt.itemsize());
        const std::size_t nd = rng() % 9;
        std::vector<std::int64_t> shape(nd);
        for (auto& e : shape) e = static_cast<std::int64_t>(rng() % (nd > 4 ? 3 : 6));
        const RandomLayout ls = random_layout(rng, shape, true), ld = random_layout(rng, shape, false);
        std::vector<std::byte> sbuf(static_cast<std::size_t>(ls.span) * item),
            dbuf(static_cast<std::size_t>(ld.span) * item);
        for (auto& b : sbuf) b = static_cast<std::byte>(rng());
        std::fill(dbuf.begin(), dbuf.end(), std::byte{0xA5});  // poison: unwritten elements show
        const std::vector<std::byte> before = dbuf;
        const View s = over(sbuf.data(), shape, ls.strides, dt, ls.offset * static_cast<std::int64_t>(item));
        const View d = over(dbuf.data(), shape, ld.strides, dt, ld.offset * static_cast<std::int64_t>(item));
        ASSERT_EQ(copy(d, s), kNoStream);
        std::vector<bool> written(dbuf.size() / item, false);
        for_each_index(shape, [&](const std::vector<std::int64_t>& idx) {
            std::int64_t so = ls.offset, doff = ld.offset;
            for (std::size_t a = 0; a < nd; ++a) {
                so += idx[a] * ls.strides[a];
                doff += idx[a] * ld.strides[a];
            }
            written[static_cast<std::size_t>(doff)] = true;
            ASSERT_EQ(std::memcmp(&dbuf[static_cast<std::size_t>(doff) * item],
                                  &sbuf[static_cast<std::size_t>(so) * item], item),
                      0)
                << "trial " << trial << " " << s.layout() << " -> " << d.layout();
        });
        for (std::size_t i = 0; i < written.size(); ++i)
            if (!written[i]) {
                ASSERT_EQ(std::memcmp(&dbuf[i * item], &before[i * item], item), 0) << "trial " << trial;
            }
        // A fresh copy in each order holds the same elements.
        for (Order order : {Order::C, Order::F, Order::K}) {
            const View fresh = copy_to(s, s.device(), order);
            EXPECT_EQ(fresh.stream(), kNoStream);
            EXPECT_TRUE(fresh.layout().is_dense());
            if (order == Order::C) {
                EXPECT_TRUE(fresh.layout().is_c_contiguous());
            } else if (order == Order::F) {
                EXPECT_TRUE(fresh.layout().is_f_contiguous());
            }
            const View back = contiguous(fresh);
            for_each_index(shape, [&](const std::vector<std::int64_t>& idx) {
                std::int64_t so = ls.offset, bo = 0;
                for (std::size_t a = 0; a < nd; ++a) {
                    so += idx[a] * ls.strides[a];
                    bo += idx[a] * back.strides()[a];
                }
                ASSERT_EQ(std::memcmp(back.ptr() + bo * static_cast<std::int64_t>(item),
                                      &sbuf[static_cast<std::size_t>(so) * item], item),
                          0);
            });
        }
    }
}

TEST(Copy, OverlappingSourceAndDestination) {
    std::vector<std::int32_t> buf(10);
    std::iota(buf.begin(), buf.end(), 0);
    const View s = over(buf.data(), {8}, {1}, dtypes::int32);
    const View d = over(buf.data(), {8}, {1}, dtypes::int32, 8);  // shifted by two elements
    copy(d, s);
    EXPECT_EQ(buf, (std::vector<std::int32_t>{0, 1, 0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Copy, ContiguousAndToReturnTheViewItself) {
    std::vector<float> buf(6);
    const View v = over(buf.data(), {2, 3}, {3, 1}, dtypes::float32);
    EXPECT_EQ(contiguous(v).ptr(), v.ptr());
    EXPECT_EQ(to_device(v, Device::cpu()).ptr(), v.ptr());
    EXPECT_NE(contiguous(v.transpose()).ptr(), v.ptr());
}

TEST(Copy, DeviceCopiesWithoutADriverSayWhy) {
    cuda::DriverOverride none("libstridex-no-such-cuda.so");
    std::vector<float> buf(4);
    const View v = over(buf.data(), {4}, {1}, dtypes::float32);
    EXPECT_ERROR(to_device(v, Device::cuda(0)), cuda, "libstridex-no-such-cuda.so");
}

// ---- stream order of pinned transfers, against the fake driver --------------------------------
// Pinned memory that records a stream is ordered on the GPU where the DMA engine takes it: the copy's
// stream waits for an event recorded on the view's stream, and the host never waits (no stream,
// event or context synchronize), so the call returns while the producer's work still runs.

using Log = std::vector<std::string>;
constexpr std::intptr_t kProducer = 0x5010, kCopyStream = 0x5020;

cuda::CUdeviceptr address_of(const void* p) { return reinterpret_cast<cuda::CUdeviceptr>(p); }

View labelled(void* data, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, Device device,
              std::intptr_t stream) {
    View v(data, 0, Layout(shape, strides), dtypes::float32, device, false, Owner());
    v.set_stream(stream);
    return v;
}

// Host arrays the fake driver treats as pinned host memory and as device memory of cuda:0.
struct PinnedAndDevice {
    alignas(64) float pinned[128] = {};
    alignas(64) float device[128] = {};
    explicit PinnedAndDevice(stridex_test::FakeCuda& fake) {
        for (int i = 0; i < 128; ++i) pinned[i] = static_cast<float>(i);
        fake->add_pointer_range(address_of(pinned), sizeof pinned, cuda::cu::kMemoryTypeHost, false, 0);
        fake->add_pointer_range(address_of(device), sizeof device, cuda::cu::kMemoryTypeDevice, false, 0);
    }
};

TEST(CopyStreams, PinnedSourceWithAStreamIsOrderedOnTheGpuNotWaitedFor) {
    stridex_test::FakeCuda fake;
    PinnedAndDevice m(fake);
    const View src = labelled(m.pinned, {64}, {1}, Device::cuda_host(), kProducer);
    const View dst = labelled(m.device, {64}, {1}, Device::cuda(0), kNoStream);
    EXPECT_EQ(copy(dst, src, kCopyStream), kCopyStream);
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5010 ctx0", "wait s5020 on e1",
                                     "memcpy_async device+0 <- pinned+0 256 on s5020"}));
    EXPECT_EQ(std::memcmp(m.device, m.pinned, 256), 0);
    fake->expect_clean();
}

TEST(CopyStreams, PinnedRowBlockWithAStreamIsOneOrdered2dCopy) {
    stridex_test::FakeCuda fake;
    PinnedAndDevice m(fake);
    // 8 rows of 8 floats out of rows of 16: rows contiguous, pitch 64 bytes -> cuMemcpy2DAsync.
    const View src = labelled(m.pinned, {8, 8}, {16, 1}, Device::cuda_host(), kProducer);
    const View dst = labelled(m.device, {8, 8}, {8, 1}, Device::cuda(0), kNoStream);
    EXPECT_EQ(copy(dst, src, kCopyStream), kCopyStream);
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5010 ctx0", "wait s5020 on e1",
                                     "memcpy_2d_async device+0 <- pinned+0 8x32 on s5020"}));
    for (int r = 0; r < 8; ++r) EXPECT_EQ(std::memcmp(m.device + 8 * r, m.pinned + 16 * r, 32), 0) << "row " << r;
    fake->expect_clean();
}

TEST(CopyStreams, PinnedDestinationWithAStreamIsOrderedOnTheGpuNotWaitedFor) {
    stridex_test::FakeCuda fake;
    PinnedAndDevice m(fake);
    for (int i = 0; i < 128; ++i) m.device[i] = static_cast<float>(1000 + i);
    const View src = labelled(m.device, {64}, {1}, Device::cuda(0), kNoStream);
    const View dst = labelled(m.pinned, {64}, {1}, Device::cuda_host(), kProducer);  // still read there
    EXPECT_EQ(copy(dst, src, kCopyStream), kCopyStream);
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5010 ctx0", "wait s5020 on e1",
                                     "memcpy_async pinned+0 <- device+0 256 on s5020"}));
    EXPECT_EQ(std::memcmp(m.pinned, m.device, 256), 0);
    fake->expect_clean();
}

TEST(CopyStreams, NoSyncWaitsForTheCopyStreamOnly) {
    // stream = kNoStream: the copy runs on the legacy default stream, which the host then waits
    // for (the caller asked for a finished copy); the producer's stream is still only an event.
    stridex_test::FakeCuda fake;
    PinnedAndDevice m(fake);
    const View src = labelled(m.pinned, {64}, {1}, Device::cuda_host(), kProducer);
    const View dst = labelled(m.device, {64}, {1}, Device::cuda(0), kNoStream);
    EXPECT_EQ(copy(dst, src, kNoStream), kNoStream);
    EXPECT_EQ(fake->take_log(), (Log{"event_create e1", "record e1 on s5010 ctx0", "wait legacy on e1",
                                     "memcpy_async device+0 <- pinned+0 256 on legacy", "stream_sync legacy"}));
    fake->expect_clean();
}

}  // namespace
}  // namespace stridex
