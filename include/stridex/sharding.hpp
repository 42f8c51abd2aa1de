// Block shardings: index arithmetic and copy plans between two shardings of one global array
// (docs/sharded.md). Core layer: no CUDA, no Python. A layout says which box of the global index
// space each shard holds and on which place; a plan says which box of which source shard each
// destination shard reads. Who holds the memory, and how a piece is copied, is the caller's.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace stridex::sharding {

// A block of the global index space: per dimension, the half-open range [start, stop).
struct Box {
    std::vector<std::int64_t> start, stop;

    int ndim() const noexcept { return static_cast<int>(start.size()); }
    std::vector<std::int64_t> shape() const;
    // The number of elements; Error(value) when it overflows int64.
    std::int64_t volume() const;
    bool empty() const noexcept;
    friend bool operator==(const Box&, const Box&) = default;
};

// "[0:4, 2:8]": how every message spells a box (Python's slice notation).
std::ostream& operator<<(std::ostream& out, const Box& box);

// The common part of two boxes of one rank, or nothing when it holds no element.
std::optional<Box> intersect(const Box& a, const Box& b);

// `box` in the coordinates of `origin`'s start (a global box as indices into the shard at origin).
Box relative_to(const Box& box, const Box& origin);

// One shard: its box and its place, an opaque key the caller chooses (a device, a rank's device):
// a plan prefers reading a replica of the same place, and spreads reads over places otherwise.
struct Shard {
    Box box;
    int place = 0;
};

// A block sharding of a global shape. Shards are identical (replicas) or disjoint, and together
// they cover every element.
class Layout {
public:
    // Checks the shards against the shape: every box of the shape's rank and inside it
    // (Error(value) naming the shard), no two boxes overlapping unless identical, every element
    // covered (Error(value) naming the count covered and an uncovered element when one is found
    // cheaply). Negative extents or places: Error(value).
    Layout(std::vector<std::int64_t> shape, std::vector<Shard> shards);

    std::span<const std::int64_t> shape() const noexcept { return shape_; }
    std::span<const Shard> shards() const noexcept { return shards_; }
    int ndim() const noexcept { return static_cast<int>(shape_.size()); }
    // The box of the whole array.
    Box full() const;

private:
    std::vector<std::int64_t> shape_;
    std::vector<Shard> shards_;
};

// Splits [0, extent) into `parts` chunks as torch.chunk and DTensor's Shard do: chunks of
// ceil(extent / parts) elements, the last ones shorter or empty. Chunk `i` of them. parts < 1 or
// i outside [0, parts): Error(value).
std::pair<std::int64_t, std::int64_t> chunk(std::int64_t extent, std::int64_t parts, std::int64_t i);

// The grid layout: dimension d cut into grid[d] chunks (chunk() above; dimensions past the grid's
// length uncut), block b (row-major over the grid) held by every place of places[b]: one place a
// block, or several for replicas. Row sharding is the grid {n}, column sharding {1, n}, 2-D blocks
// {a, b}, full replication the grid {} with one block held by all places. places.size() must be
// the grid's block count, each list non-empty: else Error(value).
Layout grid_layout(std::vector<std::int64_t> shape, std::span<const std::int64_t> grid,
                   const std::vector<std::vector<int>>& places);

// One piece of a plan: the elements of `box` (global coordinates), read from source shard `src`
// at `src_box` (coordinates inside that shard) and written to destination shard `dst` at `dst_box`.
struct Piece {
    int src = 0, dst = 0;
    Box box, src_box, dst_box;
};

// The plan that fills every destination shard (each replica too) from the source layout: for each
// destination shard, one piece per distinct source box it meets, read from one replica of that box:
// a replica on the destination's own place when there is one, else the replica whose place has
// been read least so far (elements), ties to the lowest shard index. A destination shard's pieces
// come in the order of their source place counted from the destination's place (place p + 1, p +
// 2, ... modulo the place count), so that destinations that copy at once read from different
// places. Different global shapes: Error(value).
std::vector<Piece> plan(const Layout& src, const Layout& dst);

}  // namespace stridex::sharding
