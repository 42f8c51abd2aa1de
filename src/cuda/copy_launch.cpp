// launch_for: see copy_launch.hpp.
#include "copy_launch.hpp"

#include <algorithm>

#include "stridex/error.hpp"

namespace stridex::cuda::copy_engine {
namespace {

namespace k = stridex::kernels;
using stridex::detail::CopyAxis;
using stridex::detail::CopyPlan;

// An argument block of the kind Args with both bases set (element 0 of each side plus the plan's offsets).
template <typename Args>
Args at_bases(const CopyPlan& plan, std::byte* dst, const std::byte* src) noexcept {
    Args a{};
    a.dst = reinterpret_cast<std::uint64_t>(dst + plan.dst_offset);
    a.src = reinterpret_cast<std::uint64_t>(src + plan.src_offset);
    return a;
}

// Slot of a unit of 1, 2, 4 or 8 bytes in the per-unit tile tables.
int slot_of(std::int64_t unit) noexcept { return unit == 1 ? 0 : unit == 2 ? 1 : unit == 4 ? 2 : 3; }

// Elements a side of the element tile; must match the instantiations in copy_kernels.cu (4- and
// 8-byte units take two 32-wide strips per thread, for more loads in flight).
std::int64_t tile_side(std::int64_t unit) noexcept { return unit == 16 ? k::kTile : 2 * k::kTile; }

KernelLaunch strided(const CopyPlan& plan, std::byte* dst, const std::byte* src) {
    auto a = at_bases<k::StridedArgs>(plan, dst, src);
    a.ndim = plan.ndim;
    std::int64_t rows = 1;
    for (int i = 0; i < plan.ndim; ++i) {
        a.shape[i] = plan.axes[i].extent;
        a.dst_stride[i] = plan.axes[i].dst;
        a.src_stride[i] = plan.axes[i].src;
        if (i < plan.ndim - 1) rows *= plan.axes[i].extent;
    }
    constexpr std::int64_t per_block = std::int64_t{k::kThreads} * k::kUnroll;
    const std::int64_t inner = plan.axes[plan.ndim - 1].extent;
    // Rows mode wastes at most half a block per row; short rows go element by element instead.
    a.rows_mode = inner >= per_block / 2 ? 1 : 0;
    if (a.rows_mode) {
        a.inner_blocks = (inner + per_block - 1) / per_block;
        a.blocks = rows * a.inner_blocks;
    } else {
        a.blocks = (rows * inner + per_block - 1) / per_block;
    }
    return {Family::strided, plan.unit, static_cast<unsigned>(k::kThreads), 1, 0, a.blocks, a};
}

// Every axis but `skip_a` and `skip_b` (the transposed ones), as batch axes, outermost first.
template <typename Args>
std::int64_t batch_axes(const CopyPlan& plan, int skip_a, int skip_b, Args& a) {
    std::int64_t batch = 1;
    for (int i = 0; i < plan.ndim; ++i) {
        if (i == skip_a || i == skip_b) continue;
        a.shape[a.nbatch] = plan.axes[i].extent;
        a.dst_stride[a.nbatch] = plan.axes[i].dst;
        a.src_stride[a.nbatch] = plan.axes[i].src;
        ++a.nbatch;
        batch *= plan.axes[i].extent;
    }
    return batch;
}

KernelLaunch tiled(const CopyPlan& plan, std::byte* dst, const std::byte* src) {
    auto a = at_bases<k::TiledArgs>(plan, dst, src);
    const int last = plan.ndim - 1;
    const CopyAxis &I = plan.axes[last], &J = plan.axes[plan.tile_axis];
    a.ni = I.extent;
    a.nj = J.extent;
    a.dst_i = I.dst;
    a.src_i = I.src;
    a.dst_j = J.dst;
    a.src_j = J.src;
    const std::int64_t batch = batch_axes(plan, last, plan.tile_axis, a);
    // 16-byte accesses on both sides: lined up (vtiled), or shifted into line for 1- and 2-byte units
    // (stiled; 4- and 8-byte ones measured faster in the element tile, see copy_abi.h).
    if (plan.tile_vectors || plan.unit <= 2) {
        const int slot = slot_of(plan.unit);
        const k::VecTile& shape = plan.tile_vectors ? k::kVecTiles[slot] : k::kShiftTiles[slot];
        a.tiles_i = (a.ni + shape.ti - 1) / shape.ti;
        a.tiles_j = (a.nj + shape.tj - 1) / shape.tj;
        a.blocks = a.tiles_i * a.tiles_j * batch;
        return {plan.tile_vectors ? Family::vtiled : Family::stiled,
                plan.unit,
                static_cast<unsigned>(shape.threads),
                1,
                static_cast<unsigned>(k::vec_tile_bytes(shape, static_cast<int>(plan.unit))),
                a.blocks,
                a};
    }
    const std::int64_t side = tile_side(plan.unit);
    a.tiles_i = (a.ni + side - 1) / side;
    a.tiles_j = (a.nj + side - 1) / side;
    a.blocks = a.tiles_i * a.tiles_j * batch;
    return {Family::tiled, plan.unit, k::kTile, k::kTileRows, 0, a.blocks, a};
}

KernelLaunch narrow(const CopyPlan& plan, std::byte* dst, const std::byte* src) {
    auto a = at_bases<k::NarrowArgs>(plan, dst, src);
    const int last = plan.ndim - 1;
    const CopyAxis &I = plan.axes[last], &J = plan.axes[plan.tile_axis];
    // dst packed: I is short, J long, and the rows are src's steps of I; src packed: the reverse,
    // and the rows are dst's steps of J.
    a.packed_dst = plan.packed_dst ? 1 : 0;
    a.ns = static_cast<std::int32_t>(plan.packed_dst ? I.extent : J.extent);
    a.nl = plan.packed_dst ? J.extent : I.extent;
    a.rows_stride = plan.packed_dst ? I.src : J.dst;
    const std::int64_t batch = batch_axes(plan, last, plan.tile_axis, a);
    auto lined_up = [&](std::uint64_t base, const std::int64_t* strides, std::int64_t more) {
        if (base % 16 != 0 || more % 16 != 0) return false;
        return std::all_of(strides, strides + a.nbatch, [](std::int64_t s) { return s % 16 == 0; });
    };
    a.vec_rows = lined_up(plan.packed_dst ? a.src : a.dst, plan.packed_dst ? a.src_stride : a.dst_stride, a.rows_stride)
                     ? 1
                     : 0;
    a.vec_packed = lined_up(plan.packed_dst ? a.dst : a.src, plan.packed_dst ? a.dst_stride : a.src_stride, 0) ? 1 : 0;
    // The longest chunk (a power of two, at least 16 so that runs start on 16-byte boundaries)
    // whose tile fits the shared memory the occupancy was asked for.
    std::int64_t chunk = 16;
    while (chunk < 4096 && 2 * chunk * a.ns * plan.unit <= k::kNarrowTileBytes) chunk *= 2;
    a.chunk = static_cast<std::int32_t>(chunk);
    a.chunks = (a.nl + chunk - 1) / chunk;
    a.blocks = a.chunks * batch;
    return {Family::narrow,
            plan.unit,
            static_cast<unsigned>(k::kNarrowThreads),
            1,
            static_cast<unsigned>(chunk * a.ns * plan.unit),
            a.blocks,
            a};
}

}  // namespace

KernelLaunch launch_for(const CopyPlan& plan, std::byte* dst, const std::byte* src) {
    if (plan.ndim > k::kMaxAxes)
        fail(ErrorKind::unsupported, "copy of ", plan.ndim,
             " axes that cannot be fused; the copy kernels take at most ", k::kMaxAxes);
    switch (plan.kind) {
        case CopyPlan::Kind::tiled: return tiled(plan, dst, src);
        case CopyPlan::Kind::narrow: return narrow(plan, dst, src);
        default: return strided(plan, dst, src);
    }
}

std::string entry_point(Family family, std::int64_t unit) {
    static constexpr const char* names[] = {"strided", "tiled", "vtiled", "stiled", "narrow"};
    return std::string("stridex_") + names[static_cast<int>(family)] + "_" + std::to_string(unit);
}

}  // namespace stridex::cuda::copy_engine
