// The copy plan: how the elements of one View are copied into another, decided once for the host
// loops (src/core/host_copy.cpp) and the device kernels (src/cuda/copy_kernels.cpp) alike.
//
// Both layouts are rewritten jointly into the fewest, largest steps that visit the same pairs of
// elements: axes of extent 1 dropped; axes where dst runs backwards flipped on both sides; axes
// sorted so dst's strides decrease (the innermost axis is then the one dst writes contiguously);
// neighbours that are contiguous on both sides fused; and a contiguous innermost run re-read in
// the widest unit (up to 16 bytes) that the addresses and every stride allow. Elements of a size
// that is not a power of two up to 16 become an innermost axis of smaller units.
#pragma once

#include <cstdint>

#include "stridex/view.hpp"

namespace stridex::detail {

struct CopyAxis {
    std::int64_t extent, dst, src;  // strides in bytes
};

struct CopyPlan {
    enum class Kind {
        nothing,     // no elements
        contiguous,  // one run of `bytes` bytes on both sides
        strided,     // any layouts: a walk over `axes`
        tiled,       // a transpose: dst's contiguous axis (the last) is not src's (`tile_axis`)
        narrow,      // a transpose with one short axis (< kMinTileExtent) packed on one side (`packed_dst`)
    };
    Kind kind = Kind::nothing;
    std::int64_t unit = 1;        // bytes moved as one unit (1, 2, 4, 8 or 16)
    std::int64_t bytes = 0;       // contiguous: the run's length
    std::int64_t dst_offset = 0;  // bytes from dst.ptr() / src.ptr() to the first unit visited
    std::int64_t src_offset = 0;  // (flipped axes start at the other end)
    int ndim = 0;
    CopyAxis axes[kMaxNdim + 1] = {};  // outermost first; one more for a split element
    int tile_axis = -1;                // tiled, narrow: the axis src reads contiguously
    bool packed_dst = false;           // narrow: the short axis is dst's contiguous one (else src's)
    bool tile_vectors = false;         // tiled, units of 1 to 8 bytes: 16-byte vectors line up on both sides
                                       // (else they are shifted into line, see src/cuda/kernels/copy_abi.h)
};

// Shapes and dtypes must already match; `dst` must not address one element twice (the engine
// refuses that before planning). Never throws.
CopyPlan plan_copy(const View& dst, const View& src) noexcept;

// The smallest extents for which the tiled kernel beats the strided one on a transpose.
inline constexpr std::int64_t kMinTileExtent = 16;

}  // namespace stridex::detail
