// The copy kernels run on the CPU (cuda_emulation.hpp) on the arguments the engine builds for them
// (copy_launch.hpp): every kernel family and unit, lined-up and misaligned layouts, edge tiles and
// chunks, batch axes, and random layouts, each against the host copy, destinations poisoned first.
// This is how CI, which has no GPU, checks the kernels' index arithmetic, shifts and shuffles.
#include "cuda_emulation.hpp"
// The kernels, compiled as host C++ over the emulation above.
#include "../../../src/cuda/kernels/copy_kernels.cu"
// Then the engine's side.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "../../../src/cuda/copy_launch.hpp"
#include "stridex/detail/copy_plan.hpp"
#include "stridex/host_copy.hpp"
#include "stridex/view.hpp"

namespace stridex {
namespace {

namespace ce = stridex::cuda::copy_engine;

using Runner = std::function<void(const ce::KernelLaunch&, unsigned grid)>;

template <typename Args>
Runner runner(void (*kernel)(Args)) {
    return [kernel](const ce::KernelLaunch& l, unsigned grid) {
        emulation::run(kernel, grid, l.threads_x, l.threads_y, l.shared_bytes, std::get<Args>(l.args));
    };
}

const std::map<std::string, Runner>& entry_points() {
    static const std::map<std::string, Runner> table = {
        {"stridex_strided_1", runner(stridex_strided_1)},   {"stridex_strided_2", runner(stridex_strided_2)},
        {"stridex_strided_4", runner(stridex_strided_4)},   {"stridex_strided_8", runner(stridex_strided_8)},
        {"stridex_strided_16", runner(stridex_strided_16)}, {"stridex_tiled_4", runner(stridex_tiled_4)},
        {"stridex_tiled_8", runner(stridex_tiled_8)},       {"stridex_tiled_16", runner(stridex_tiled_16)},
        {"stridex_vtiled_1", runner(stridex_vtiled_1)},     {"stridex_vtiled_2", runner(stridex_vtiled_2)},
        {"stridex_vtiled_4", runner(stridex_vtiled_4)},     {"stridex_vtiled_8", runner(stridex_vtiled_8)},
        {"stridex_stiled_1", runner(stridex_stiled_1)},     {"stridex_stiled_2", runner(stridex_stiled_2)},
        {"stridex_narrow_1", runner(stridex_narrow_1)},     {"stridex_narrow_2", runner(stridex_narrow_2)},
        {"stridex_narrow_4", runner(stridex_narrow_4)},     {"stridex_narrow_8", runner(stridex_narrow_8)},
        {"stridex_narrow_16", runner(stridex_narrow_16)},
    };
    return table;
}

constexpr std::byte kPoison{0xA5};

struct Buffer {
    explicit Buffer(std::size_t bytes, unsigned seed) : bytes(bytes + 64) {
        std::mt19937 rng(seed);
        for (auto& b : this->bytes) b = static_cast<std::byte>(rng());
    }
    std::byte* at(std::int64_t offset) { return bytes.data() + 32 + offset; }  // 32: 16-byte aligned (vector)
    std::vector<std::byte> bytes;
};

using Ints = std::vector<std::int64_t>;

View over(std::byte* data, const Ints& shape, const Ints& strides, Dtype dtype) {
    return View(data, 0, Layout(shape, strides), dtype, Device::cpu(), false, Owner());
}

std::vector<std::int64_t> c_strides(std::span<const std::int64_t> shape) {
    std::vector<std::int64_t> s(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
    return s;
}

std::string describe(const View& v) {
    std::string out = v.dtype().name() + " shape";
    for (const std::int64_t e : v.shape()) out += " " + std::to_string(e);
    out += " strides";
    for (const std::int64_t s : v.strides()) out += " " + std::to_string(s);
    return out + " at +" + std::to_string(reinterpret_cast<std::uintptr_t>(v.ptr()) % 16);
}

// Copies src into a poisoned C-contiguous destination with the kernel the plan picks (on `grid`
// blocks) and with the host copy, and compares every byte; returns the family it ran.
ce::Family expect_kernel_copies(const View& src, unsigned grid = 3) {
    const std::int64_t bytes = src.size() * src.itemsize();
    std::vector<std::byte> got(static_cast<std::size_t>(bytes) + 64, kPoison), want = got;
    // 16-byte aligned destinations, as the engine's allocations are.
    auto* got_base = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(got.data()) + 15) &
                                                  ~std::uintptr_t{15});
    auto* want_base = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(want.data()) + 15) &
                                                   ~std::uintptr_t{15});
    const Ints shape(src.shape().begin(), src.shape().end());
    const View dst = over(got_base, shape, c_strides(shape), src.dtype());
    copy_host(over(want_base, shape, c_strides(shape), src.dtype()), src);
    const detail::CopyPlan plan = detail::plan_copy(dst, src);
    EXPECT_TRUE(plan.kind != detail::CopyPlan::Kind::contiguous && plan.kind != detail::CopyPlan::Kind::nothing);
    const ce::KernelLaunch l = ce::launch_for(plan, dst.ptr(), src.ptr());
    entry_points().at(ce::entry_point(l.family, l.unit))(l, grid);
    EXPECT_EQ(std::memcmp(got_base, want_base, static_cast<std::size_t>(bytes) + 16), 0)
        << ce::entry_point(l.family, l.unit) << " over " << describe(src);
    return l.family;
}

// A (rows x cols) array transposed, its base `skip` elements past a 16-byte boundary.
View transposed(Buffer& buf, std::int64_t rows, std::int64_t cols, Dtype dtype, std::int64_t skip = 0) {
    return over(buf.at(skip * dtype.itemsize()), {cols, rows}, {1, cols}, dtype);
}

TEST(EmulatedKernels, LinedUpTransposesTakeTheVectorTile) {
    for (const Dtype dtype : {dtypes::uint8, dtypes::int16, dtypes::float32, dtypes::float64}) {
        Buffer buf(64 * 48 * 8, 1);
        EXPECT_EQ(expect_kernel_copies(transposed(buf, 64, 48, dtype)), ce::Family::vtiled) << dtype.name();
    }
}

TEST(EmulatedKernels, OddAndMisalignedTransposesTakeTheShiftedOrTheElementTile) {
    // Rows of odd lengths, edge tiles on both sides, every misaligned start: 1- and 2-byte units
    // shifted, 4- and 8-byte ones element by element.
    for (const Dtype dtype : {dtypes::uint8, dtypes::int16, dtypes::float32, dtypes::float64}) {
        const std::int64_t item = dtype.itemsize();
        for (const auto& [rows, cols] : {std::pair{37, 45}, std::pair{131, 67}, std::pair{70, 129}}) {
            for (std::int64_t skip = 0; skip < 16 / item; skip += (item == 1 ? 5 : 1)) {
                Buffer buf(static_cast<std::size_t>(rows * cols * item) + 16, 2);
                EXPECT_EQ(expect_kernel_copies(transposed(buf, rows, cols, dtype, skip)),
                          item <= 2 ? ce::Family::stiled : ce::Family::tiled)
                    << dtype.name() << " " << rows << "x" << cols << " skip " << skip;
            }
        }
    }
}

TEST(EmulatedKernels, BatchedShiftedTransposes) {
    Buffer buf(5 * 67 * 35 * 2, 3);
    // (5, 67, 35) int16 -> permute (0, 2, 1)
    EXPECT_EQ(expect_kernel_copies(over(buf.at(2), {5, 35, 67}, {67 * 35, 1, 35}, dtypes::int16)), ce::Family::stiled);
    Buffer buf4(33 * 7 * 65 * 4, 4);
    // (33, 7, 65) float32 -> permute (2, 1, 0)
    EXPECT_EQ(expect_kernel_copies(over(buf4.at(0), {65, 7, 33}, {1, 65, 7 * 65}, dtypes::float32)), ce::Family::tiled);
}

TEST(EmulatedKernels, NarrowTransposesBothWaysEveryUnit) {
    for (const Dtype dtype : {dtypes::uint8, dtypes::int16, dtypes::float32, dtypes::float64, dtypes::complex128}) {
        const std::int64_t item = dtype.itemsize();
        for (const std::int64_t ns : {2, 3, 7, 15}) {
            for (const std::int64_t nl : {16, 333, 5000}) {
                for (const std::int64_t skip : {0, 1}) {
                    Buffer buf(static_cast<std::size_t>(2 * ns * nl * item) + 32, 5);
                    // NCHW -> NHWC: (2, ns, nl) -> (2, nl, ns): dst packs the short axis
                    EXPECT_EQ(expect_kernel_copies(over(buf.at(skip * item), {2, nl, ns}, {ns * nl, 1, nl}, dtype), 2),
                              ce::Family::narrow)
                        << dtype.name() << " ns " << ns << " nl " << nl << " skip " << skip;
                    // NHWC -> NCHW: (2, nl, ns) -> (2, ns, nl): src packs it
                    EXPECT_EQ(expect_kernel_copies(over(buf.at(skip * item), {2, ns, nl}, {ns * nl, 1, ns}, dtype), 2),
                              ce::Family::narrow)
                        << dtype.name() << " ns " << ns << " nl " << nl << " skip " << skip;
                }
            }
        }
    }
}

TEST(EmulatedKernels, SixteenByteTransposesAndStridedCopies) {
    Buffer buf(40 * 33 * 16, 6);
    EXPECT_EQ(expect_kernel_copies(transposed(buf, 40, 33, dtypes::complex128)), ce::Family::tiled);
    Buffer rows(64 * 200 * 4, 7);  // rows of 200 floats
    EXPECT_EQ(expect_kernel_copies(over(rows.at(0), {64, 50}, {200, 2}, dtypes::float32)), ce::Family::strided);
    EXPECT_EQ(expect_kernel_copies(over(rows.at(0), {32, 600}, {200, 1}, dtypes::float32)), ce::Family::strided);
}

TEST(EmulatedKernels, RandomLayoutsMatchTheHostCopy) {
    std::mt19937 rng(2026);
    const Dtype dtypes_[] = {dtypes::uint8, dtypes::int16, dtypes::float32, dtypes::float64, dtypes::complex128};
    for (int round = 0; round < 40; ++round) {
        const int ndim = 2 + static_cast<int>(rng() % 3);
        std::vector<std::int64_t> shape(static_cast<std::size_t>(ndim));
        for (auto& e : shape) e = 1 + static_cast<std::int64_t>(rng() % (ndim > 2 ? 24 : 200));
        const Dtype dtype = dtypes_[rng() % 5];
        const std::int64_t item = dtype.itemsize();
        std::vector<std::int64_t> strides = c_strides(shape);
        std::int64_t offset = static_cast<std::int64_t>(rng() % 4);  // elements past an aligned start
        std::int64_t span = 1;
        for (std::size_t a = 0; a < shape.size(); ++a) span += (shape[a] - 1) * strides[a];
        // Steps of 2 on some axes, a reversal on others, then a permutation.
        std::vector<std::int64_t> step(shape.size(), 1);
        for (std::size_t a = 0; a < shape.size(); ++a) {
            const unsigned r = rng() % 5;
            if (r == 3 && shape[a] > 1) {
                step[a] = 2;
            } else if (r == 4) {
                offset += (shape[a] - 1) * strides[a];
                step[a] = -1;
            }
        }
        std::vector<std::int64_t> vshape(shape.size()), vstrides(shape.size());
        for (std::size_t a = 0; a < shape.size(); ++a) {
            vshape[a] = step[a] == 2 ? (shape[a] + 1) / 2 : shape[a];
            vstrides[a] = strides[a] * step[a];
        }
        std::vector<std::size_t> perm(shape.size());
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::vector<std::int64_t> pshape, pstrides;
        for (const std::size_t a : perm) {
            pshape.push_back(vshape[a]);
            pstrides.push_back(vstrides[a]);
        }
        Buffer buf(static_cast<std::size_t>((span + 8) * item), static_cast<unsigned>(round));
        const View src = over(buf.at(offset * item), pshape, pstrides, dtype);
        const detail::CopyPlan plan = detail::plan_copy(over(buf.at(0), pshape, c_strides(pshape), dtype),
                                                        src);  // the same plan kind as any dense dst
        if (plan.kind == detail::CopyPlan::Kind::contiguous || plan.kind == detail::CopyPlan::Kind::nothing) continue;
        expect_kernel_copies(src, 2);
    }
}

}  // namespace
}  // namespace stridex
