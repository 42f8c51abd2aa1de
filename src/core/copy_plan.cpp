// plan_copy: see stridex/detail/copy_plan.hpp.
#include "stridex/detail/copy_plan.hpp"

#include <algorithm>
#include <bit>

namespace stridex::detail {
namespace {

// Fuses axis a+1 into axis a wherever both sides step over axis a+1 exactly once per step of a.
int fuse(CopyAxis* axes, int n) {
    int out = 0;
    for (int a = 0; a < n; ++a) {
        if (out > 0) {
            CopyAxis& prev = axes[out - 1];
            const CopyAxis& cur = axes[a];
            if (prev.dst == cur.extent * cur.dst && prev.src == cur.extent * cur.src) {
                prev = CopyAxis{prev.extent * cur.extent, cur.dst, cur.src};
                continue;
            }
        }
        axes[out++] = axes[a];
    }
    return out;
}

bool all_strides_multiple(const CopyAxis* axes, int n, std::int64_t w) {
    for (int a = 0; a < n; ++a)
        if (axes[a].dst % w != 0 || axes[a].src % w != 0) return false;
    return true;
}

std::uintptr_t address(const View& v, std::int64_t offset) {
    return reinterpret_cast<std::uintptr_t>(v.ptr()) + static_cast<std::uintptr_t>(offset);
}

}  // namespace

CopyPlan plan_copy(const View& dst, const View& src) noexcept {
    CopyPlan p;
    if (src.layout().empty()) return p;
    const std::int64_t item = src.itemsize();
    int n = 0;
    for (int a = 0; a < src.ndim(); ++a) {
        const auto i = static_cast<std::size_t>(a);
        const std::int64_t e = src.shape()[i];
        if (e == 1) continue;
        CopyAxis axis{e, dst.strides()[i] * item, src.strides()[i] * item};
        if (axis.dst < 0) {  // walk dst forwards: start both sides at the axis's other end
            p.dst_offset += (e - 1) * axis.dst;
            p.src_offset += (e - 1) * axis.src;
            axis.dst = -axis.dst;
            axis.src = -axis.src;
        }
        p.axes[n++] = axis;
    }
    // dst's largest stride first, so the last axis is the one dst writes densest. Stable: equal
    // strides (extent-1 leftovers cannot remain) keep their order.
    std::stable_sort(p.axes, p.axes + n, [](const CopyAxis& a, const CopyAxis& b) { return a.dst > b.dst; });
    n = fuse(p.axes, n);

    // Elements that are no unit of their own (complex64 is 8, a 12-byte struct is 3 units of 4).
    std::int64_t unit = item;
    if (!std::has_single_bit(static_cast<std::uint64_t>(item)) || item > 16) {
        unit = std::int64_t{1} << std::countr_zero(static_cast<std::uint64_t>(item));
        unit = std::min<std::int64_t>(unit, 16);
        p.axes[n++] = CopyAxis{item / unit, unit, unit};
        n = fuse(p.axes, n);
    }
    // A run contiguous on both sides is read in the widest unit every address allows.
    if (n > 0 && p.axes[n - 1].dst == unit && p.axes[n - 1].src == unit) {
        const std::int64_t run = p.axes[n - 1].extent * unit;
        const std::uintptr_t d = address(dst, p.dst_offset), s = address(src, p.src_offset);
        for (std::int64_t w = 16; w > unit; w /= 2) {
            if (run % w == 0 && d % static_cast<std::uintptr_t>(w) == 0 && s % static_cast<std::uintptr_t>(w) == 0 &&
                all_strides_multiple(p.axes, n - 1, w)) {
                p.axes[n - 1] = CopyAxis{run / w, w, w};
                unit = w;
                break;
            }
        }
    }
    p.unit = unit;
    p.ndim = n;
    if (n == 0 || (n == 1 && p.axes[0].dst == unit && p.axes[0].src == unit)) {
        p.kind = CopyPlan::Kind::contiguous;
        p.bytes = n == 0 ? unit : p.axes[0].extent * unit;
        return p;
    }
    p.kind = CopyPlan::Kind::strided;
    // A transpose: dst's innermost axis is dense, src is dense along another axis.
    const CopyAxis& inner = p.axes[n - 1];
    if (inner.dst == unit && inner.src != unit && inner.extent >= kMinTileExtent) {
        for (int a = n - 2; a >= 0; --a) {
            if (p.axes[a].src == unit && p.axes[a].extent >= kMinTileExtent) {
                p.kind = CopyPlan::Kind::tiled;
                p.tile_axis = a;
                break;
            }
        }
    }
    if (p.kind == CopyPlan::Kind::strided && inner.dst == unit && inner.src != unit && n >= 2) {
        // A transpose with one short axis, such as the 3 channels of NCHW <-> NHWC: too short for
        // a tile, but where it is packed on one side (its steps times the long axis's are one
        // contiguous run there), whole runs and their few rows move instead.
        const CopyAxis& next = p.axes[n - 2];
        if (inner.extent < kMinTileExtent && next.src == unit && next.dst == inner.extent * unit &&
            next.extent >= kMinTileExtent) {
            p.kind = CopyPlan::Kind::narrow;  // short dst axis: dst packed, src rows
            p.tile_axis = n - 2;
            p.packed_dst = true;
        } else if (inner.extent >= kMinTileExtent) {
            for (int a = n - 2; a >= 0; --a) {
                if (p.axes[a].src == unit && p.axes[a].extent < kMinTileExtent &&
                    inner.src == p.axes[a].extent * unit) {
                    p.kind = CopyPlan::Kind::narrow;  // short src axis: src packed, dst rows
                    p.tile_axis = a;
                    break;
                }
            }
        }
    }
    if (p.kind == CopyPlan::Kind::tiled && unit <= 8) {
        // Vectors of 16 bytes (16 / unit elements): src's along the tile axis and dst's along the
        // inner axis start at 16-byte boundaries, and no vector crosses the end of either axis.
        const std::int64_t v = 16 / unit;
        bool ok = address(dst, p.dst_offset) % 16 == 0 && address(src, p.src_offset) % 16 == 0 &&
                  p.axes[n - 1].extent % v == 0 && p.axes[p.tile_axis].extent % v == 0;
        for (int a = 0; a < n && ok; ++a) {
            if (a != p.tile_axis) ok = p.axes[a].src % 16 == 0;
            if (a != n - 1) ok = ok && p.axes[a].dst % 16 == 0;
        }
        p.tile_vectors = ok;
    }
    return p;
}

}  // namespace stridex::detail
