// Block shardings (stridex/sharding.hpp): boxes, the checks of a layout, chunking, and the plan of
// pieces between two layouts. Every count of elements is overflow-checked: a global shape of
// int64 extents may hold more elements than int64 counts.
#include "stridex/sharding.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>

#include "stridex/error.hpp"

namespace stridex::sharding {
namespace {

// The most candidate points the coverage check visits to name an uncovered element; past it the
// message gives the counts alone (the check itself never depends on it).
constexpr std::int64_t kCandidateLimit = std::int64_t{1} << 16;

std::string str(std::span<const std::int64_t> shape) {
    std::ostringstream out;
    out << '(';
    for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
    out << (shape.size() == 1 ? ",)" : ")");
    return out.str();
}

bool contains(const Box& box, std::span<const std::int64_t> point) {
    for (int d = 0; d < box.ndim(); ++d) {
        const auto i = static_cast<std::size_t>(d);
        if (point[i] < box.start[i] || point[i] >= box.stop[i]) return false;
    }
    return true;
}

// An element no box holds, looked for among the corners of the grid that the boxes' bounds draw
// (the uncovered region is a union of that grid's cells, so one of their lower corners is in it).
std::optional<std::vector<std::int64_t>> uncovered_element(std::span<const std::int64_t> shape,
                                                           const std::vector<const Box*>& boxes) {
    const std::size_t n = shape.size();
    std::vector<std::vector<std::int64_t>> axes(n);
    std::int64_t candidates = 1;
    for (std::size_t d = 0; d < n; ++d) {
        std::vector<std::int64_t>& a = axes[d];
        a.push_back(0);
        for (const Box* b : boxes)
            for (std::int64_t c : {b->start[d], b->stop[d]})
                if (c < shape[d]) a.push_back(c);
        std::sort(a.begin(), a.end());
        a.erase(std::unique(a.begin(), a.end()), a.end());
        if (__builtin_mul_overflow(candidates, static_cast<std::int64_t>(a.size()), &candidates) ||
            candidates > kCandidateLimit)
            return std::nullopt;
    }
    std::vector<std::size_t> at(n, 0);
    std::vector<std::int64_t> point(n);
    for (;;) {
        for (std::size_t d = 0; d < n; ++d) point[d] = axes[d][at[d]];
        if (std::none_of(boxes.begin(), boxes.end(), [&](const Box* b) { return contains(*b, point); })) return point;
        std::size_t d = n;
        while (d > 0 && ++at[d - 1] == axes[d - 1].size()) at[--d] = 0;
        if (d == 0) return std::nullopt;
    }
}

}  // namespace

std::vector<std::int64_t> Box::shape() const {
    std::vector<std::int64_t> out(start.size());
    for (std::size_t d = 0; d < start.size(); ++d) out[d] = stop[d] - start[d];
    return out;
}

std::int64_t Box::volume() const {
    std::int64_t n = 1;
    for (std::size_t d = 0; d < start.size(); ++d)
        if (__builtin_mul_overflow(n, stop[d] - start[d], &n))
            fail(ErrorKind::value, "the box ", *this, " holds more than 2**63 - 1 elements");
    return n;
}

bool Box::empty() const noexcept {
    for (std::size_t d = 0; d < start.size(); ++d)
        if (stop[d] <= start[d]) return true;
    return false;
}

std::ostream& operator<<(std::ostream& out, const Box& box) {
    out << '[';
    for (std::size_t d = 0; d < box.start.size(); ++d) out << (d ? ", " : "") << box.start[d] << ':' << box.stop[d];
    return out << ']';
}

std::optional<Box> intersect(const Box& a, const Box& b) {
    Box out;
    out.start.resize(a.start.size());
    out.stop.resize(a.start.size());
    for (std::size_t d = 0; d < a.start.size(); ++d) {
        out.start[d] = std::max(a.start[d], b.start[d]);
        out.stop[d] = std::min(a.stop[d], b.stop[d]);
        if (out.stop[d] <= out.start[d]) return std::nullopt;
    }
    return out;
}

Box relative_to(const Box& box, const Box& origin) {
    Box out = box;
    for (std::size_t d = 0; d < box.start.size(); ++d) {
        out.start[d] -= origin.start[d];
        out.stop[d] -= origin.start[d];
    }
    return out;
}

Layout::Layout(std::vector<std::int64_t> shape, std::vector<Shard> shards)
    : shape_(std::move(shape)), shards_(std::move(shards)) {
    const std::string global = str(shape_);
    for (std::int64_t e : shape_)
        if (e < 0) fail(ErrorKind::value, "a global shape has no negative extent, found ", global);
    const Box all = full();
    const std::int64_t total = all.volume();
    // Distinct boxes (a replica's box is its first holder's), each checked once.
    std::vector<const Box*> distinct;
    std::vector<std::size_t> first_holder;
    for (std::size_t i = 0; i < shards_.size(); ++i) {
        const Box& b = shards_[i].box;
        if (shards_[i].place < 0)
            fail(ErrorKind::value, "shard ", i, ": a place is a key >= 0, found ", shards_[i].place);
        if (b.start.size() != shape_.size() || b.stop.size() != shape_.size())
            fail(ErrorKind::value, "shard ", i, ": expected ", shape_.size(), " index ranges for the global shape ",
                 global, ", found ", std::max(b.start.size(), b.stop.size()));
        for (std::size_t d = 0; d < shape_.size(); ++d)
            if (b.start[d] < 0 || b.stop[d] < b.start[d] || b.stop[d] > shape_[d])
                fail(ErrorKind::value, "shard ", i, ": the index ranges ", b, " leave the global shape ", global,
                     " (expected 0 <= start <= stop <= extent in every dimension)");
        bool seen = false;
        for (std::size_t k = 0; k < distinct.size() && !seen; ++k) {
            if (*distinct[k] == b) {
                seen = true;
            } else if (intersect(*distinct[k], b)) {
                fail(ErrorKind::value, "shards ", first_holder[k], " ", *distinct[k], " and ", i, " ", b,
                     " overlap without being identical (a replica must hold the same index ranges)");
            }
        }
        if (!seen && !b.empty()) {
            distinct.push_back(&b);
            first_holder.push_back(i);
        }
    }
    // Disjoint boxes inside the shape cover it exactly when their volumes add up to its own.
    std::int64_t covered = 0;
    for (const Box* b : distinct) covered += b->volume();  // <= total: disjoint and inside
    if (covered == total) return;
    std::ostringstream out;
    out << "the shards cover " << covered << " of the " << total << " elements of the global shape " << global;
    if (const auto missing = uncovered_element(shape_, distinct)) out << "; no shard holds element " << str(*missing);
    throw Error(ErrorKind::value, out.str());
}

Box Layout::full() const { return Box{std::vector<std::int64_t>(shape_.size(), 0), shape_}; }

std::pair<std::int64_t, std::int64_t> chunk(std::int64_t extent, std::int64_t parts, std::int64_t i) {
    if (parts < 1) fail(ErrorKind::value, "a dimension is cut into at least 1 part, found ", parts);
    if (i < 0 || i >= parts) fail(ErrorKind::value, "chunk ", i, " of ", parts, " does not exist");
    if (extent < 0) fail(ErrorKind::value, "an extent is >= 0, found ", extent);
    // ceil(extent / parts), written so that nothing overflows (extent + parts - 1 may).
    const std::int64_t size = extent / parts + (extent % parts != 0);
    std::int64_t start = 0;
    if (__builtin_mul_overflow(i, size, &start) || start > extent) start = extent;  // an empty last chunk
    return {start, extent - start < size ? extent : start + size};
}

Layout grid_layout(std::vector<std::int64_t> shape, std::span<const std::int64_t> grid,
                   const std::vector<std::vector<int>>& places) {
    if (grid.size() > shape.size())
        fail(ErrorKind::value, "a grid of ", grid.size(), " dimensions cannot cut the global shape ", str(shape));
    std::int64_t blocks = 1;
    for (std::int64_t g : grid) {
        if (g < 1) fail(ErrorKind::value, "a grid has at least 1 block per dimension, found ", str(grid));
        if (__builtin_mul_overflow(blocks, g, &blocks))
            fail(ErrorKind::value, "the grid ", str(grid), " has more than 2**63 - 1 blocks");
    }
    if (static_cast<std::int64_t>(places.size()) != blocks)
        fail(ErrorKind::value, "the grid ", str(grid), " has ", blocks, " blocks, found places for ", places.size());
    std::vector<Shard> shards;
    std::vector<std::int64_t> at(grid.size(), 0);
    for (std::int64_t b = 0; b < blocks; ++b) {
        // Block b's grid coordinates, row-major.
        std::int64_t rest = b;
        for (std::size_t d = grid.size(); d-- > 0;) {
            at[d] = rest % grid[d];
            rest /= grid[d];
        }
        Box box{std::vector<std::int64_t>(shape.size(), 0), shape};
        for (std::size_t d = 0; d < grid.size(); ++d)
            std::tie(box.start[d], box.stop[d]) = chunk(shape[d], grid[d], at[d]);
        const auto& holders = places[static_cast<std::size_t>(b)];
        if (holders.empty()) fail(ErrorKind::value, "block ", b, " ", box, " of the grid has no place");
        for (int p : holders) shards.push_back(Shard{box, p});
    }
    return Layout(std::move(shape), std::move(shards));
}

std::vector<Piece> plan(const Layout& src, const Layout& dst) {
    if (!std::equal(src.shape().begin(), src.shape().end(), dst.shape().begin(), dst.shape().end()))
        fail(ErrorKind::value, "the destination's global shape is ", str(dst.shape()), ", the source's ",
             str(src.shape()));
    // Replica groups of the source: shards of one box, in shard order.
    std::vector<std::vector<int>> groups;
    for (std::size_t i = 0; i < src.shards().size(); ++i) {
        const Box& b = src.shards()[i].box;
        if (b.empty()) continue;
        auto g = std::find_if(groups.begin(), groups.end(), [&](const std::vector<int>& group) {
            return src.shards()[static_cast<std::size_t>(group.front())].box == b;
        });
        if (g == groups.end())
            groups.push_back({static_cast<int>(i)});
        else
            g->push_back(static_cast<int>(i));
    }
    int places = 1;
    for (const Layout* l : {&src, &dst})
        for (const Shard& s : l->shards()) places = std::max(places, s.place + 1);
    std::map<int, std::int64_t> load;  // elements read from each source place so far
    std::vector<Piece> out;
    for (std::size_t j = 0; j < dst.shards().size(); ++j) {
        const Shard& to = dst.shards()[j];
        const std::size_t first = out.size();
        for (const auto& group : groups) {
            const auto common = intersect(src.shards()[static_cast<std::size_t>(group.front())].box, to.box);
            if (!common) continue;
            int pick = -1;
            for (int s : group)
                if (src.shards()[static_cast<std::size_t>(s)].place == to.place) {
                    pick = s;
                    break;
                }
            if (pick < 0) {
                pick = group.front();
                for (int s : group)
                    if (load[src.shards()[static_cast<std::size_t>(s)].place] <
                        load[src.shards()[static_cast<std::size_t>(pick)].place])
                        pick = s;
            }
            const Shard& from = src.shards()[static_cast<std::size_t>(pick)];
            // Saturating: many destination replicas may read more than 2**63 elements in all.
            std::int64_t& read = load[from.place];
            if (__builtin_add_overflow(read, common->volume(), &read)) read = INT64_MAX;
            out.push_back(Piece{pick, static_cast<int>(j), *common, relative_to(*common, from.box),
                                relative_to(*common, to.box)});
        }
        // This destination's pieces from its own place first, then place + 1, + 2, ...
        const auto turn = [&](const Piece& p) {
            return (src.shards()[static_cast<std::size_t>(p.src)].place - to.place + places) % places;
        };
        std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                         [&](const Piece& a, const Piece& b) { return turn(a) < turn(b); });
    }
    return out;
}

}  // namespace stridex::sharding
