// The native half of sharded arrays (docs/sharded.md): the core's layouts and plans
// (stridex/sharding.hpp) for Python, the executor of a plan's pieces through the copy engine, and
// the hook that lets stridex.copy take a stridex.ShardedView behind the same door. The Python half
// (framework objects, the ShardedView type) is python/stridex/_sharded.py.
#include "bind/bind_sharded.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <optional>
#include <vector>

#include "common/arguments.hpp"
#include "common/bindings.hpp"
#include "export/export.hpp"
#include "sanitizer/handover.hpp"
#include "sanitizer/sanitizer.hpp"
#include "stream/stream_policy.hpp"
#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/peer.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/sharding.hpp"

namespace nb = nanobind;

namespace stridex::python {
namespace {

namespace sh = sharding;

// The ShardedView type and its copy function, set once by python/stridex/_sharded.py at import and
// kept for the life of the process (a module-level object, like the interned names).
PyObject* g_sharded_type = nullptr;
PyObject* g_sharded_copy = nullptr;

nb::tuple to_tuple(const std::vector<std::int64_t>& v) {
    nb::list out;
    for (std::int64_t x : v) out.append(x);
    return nb::tuple(out);
}

// [(start, stop, place), ...] -> shards; `what` names the argument.
std::vector<sh::Shard> shards_arg(nb::handle shards, const char* what) {
    std::vector<sh::Shard> out;
    for (nb::handle item : shards) {
        const nb::tuple t = nb::cast<nb::tuple>(item);
        if (t.size() != 3) fail(ErrorKind::type, what, ": expected (start, stop, place) triples");
        sh::Box box{int64_list_arg(t[0].ptr(), what), int64_list_arg(t[1].ptr(), what)};
        out.push_back(sh::Shard{std::move(box), int32_arg(t[2].ptr(), what)});
    }
    return out;
}

sh::Layout layout_arg(nb::handle shape, nb::handle shards, const char* what) {
    return sh::Layout(int64_list_arg(shape.ptr(), what), shards_arg(shards, what));
}

nb::list shards_out(const sh::Layout& layout) {
    nb::list out;
    for (const sh::Shard& s : layout.shards())
        out.append(nb::make_tuple(to_tuple(s.box.start), to_tuple(s.box.stop), s.place));
    return out;
}

// `v`'s block at `start` of `shape` (indices into v), a View of the same memory.
View block(const View& v, const std::vector<std::int64_t>& start, const std::vector<std::int64_t>& shape) {
    View out = v;
    for (std::size_t d = 0; d < start.size(); ++d)
        out = out.slice(static_cast<int>(d), Slice{start[d], start[d] + shape[d], 1});
    return out;
}

// Where a piece runs: dst's GPU when dst is GPU memory, else src's (the copy engine's rule), or -1
// for a copy between host memories.
int run_ordinal(const View& dst, const View& src) {
    if (dst.device().type == DeviceType::kCUDA) return dst.device().id;
    if (src.device().type == DeviceType::kCUDA) return src.device().id;
    return -1;
}

struct Streams {
    bool no_sync = false;
    std::map<int, std::intptr_t> by_ordinal;  // missing: the legacy default stream
    std::intptr_t of(int ordinal) const {
        const auto it = by_ordinal.find(ordinal);
        return it == by_ordinal.end() ? kDefaultStream : it->second;
    }
};

// None (each GPU's legacy default stream), NO_SYNC (the same, waited for before returning) or a
// dict {ordinal: stream} (python/stridex/_sharded.py turns every other spelling into one).
Streams streams_arg(nb::handle streams) {
    Streams out;
    if (streams.is_none()) return out;
    if (!nb::isinstance<nb::dict>(streams)) {
        out.no_sync = parse_stream(streams.ptr()).kind == StreamRequest::Kind::no_sync;
        if (!out.no_sync) fail(ErrorKind::type, "_copy_pieces(): streams must be None, NO_SYNC or a dict");
        return out;
    }
    for (auto [key, value] : nb::cast<nb::dict>(streams)) {
        const StreamRequest r = parse_stream(value.ptr());
        out.by_ordinal[int32_arg(key.ptr(), "stream's device")] = r.kind == StreamRequest::Kind::on_stream
                                                                      ? r.handle
                                                                      : kDefaultStream;
    }
    return out;
}

// The stream a piece runs on: its run GPU's, or kNoStream for pieces that complete before
// returning (between host memories, and into host memory: a host shard may take pieces from
// several GPUs, whose streams no single stream value could name).
std::intptr_t piece_stream(const View& to, const View& from, const Streams& streams) {
    const int run = run_ordinal(to, from);
    if (run < 0 || to.device().type != DeviceType::kCUDA) return kNoStream;
    return streams.of(run);
}

// One piece, through the copy engine, on `s` (piece_stream). Between two GPUs without peer
// access, a strided piece goes through a packed block on each GPU (the engine's peer memcpy needs
// no peer access; its kernels do): src's block -> a packed copy on src's GPU (on that GPU's
// stream) -> dst's GPU -> dst's block. `staged` takes that path for every cross-GPU piece (the
// tests' way to run it on GPUs with peer access). Returns the stream dst's block is ready on.
std::intptr_t copy_piece(const View& to, const View& from, const Streams& streams, std::intptr_t s, bool staged) {
    if (s == kNoStream) return copy(to, from, kNoStream);
    const int run = to.device().id;  // a GPU: piece_stream gave a stream
    const bool cross = from.device().type == DeviceType::kCUDA && from.device().id != run;
    const bool packed = to.layout().is_c_contiguous() && from.layout().is_c_contiguous();
    if (!cross || packed || (!staged && cuda::peer_access(run, from.device().id))) return copy(to, from, s);
    const std::vector<std::int64_t> shape(from.shape().begin(), from.shape().end());
    const std::intptr_t s_from = streams.of(from.device().id);
    View near = allocate(shape, from.dtype(), from.device(), Order::C, false, s_from);
    near.set_stream(copy(near, from, s_from));
    View far = allocate(shape, from.dtype(), to.device(), Order::C, false, s);
    far.set_stream(copy(far, near, s));
    return copy(to, far, s);
}

// Runs pieces (src shard, dst shard, src start, dst start, shape) from src views into dst views;
// each dst View records the stream its data is ready on (None for host memory, and for all with
// NO_SYNC: every GPU that ran a piece is then waited for before returning).
void copy_pieces(nb::list dst, nb::list src, nb::list pieces, nb::handle streams_obj, bool staged) {
    const Streams streams = streams_arg(streams_obj);
    std::vector<PyView*> to, from;
    for (nb::handle v : dst) {
        if (!is_view(v.ptr())) fail(ErrorKind::type, "_copy_pieces(): dst holds Views only");
        to.push_back(&py_view(v.ptr()));
    }
    for (nb::handle v : src) {
        if (!is_view(v.ptr())) fail(ErrorKind::type, "_copy_pieces(): src holds Views only");
        from.push_back(&py_view(v.ptr()));
    }
    struct Job {
        std::size_t src, dst;
        View in, out;
    };
    std::vector<Job> jobs;
    for (nb::handle item : pieces) {
        const nb::tuple t = nb::cast<nb::tuple>(item);
        const std::size_t i = nb::cast<std::size_t>(t[0]), j = nb::cast<std::size_t>(t[1]);
        if (i >= from.size() || j >= to.size()) fail(ErrorKind::index, "_copy_pieces(): a piece names no shard");
        const std::vector<std::int64_t> shape = int64_list_arg(t[4].ptr(), "piece shape");
        jobs.push_back(Job{i, j, block(from[i]->view, int64_list_arg(t[2].ptr(), "piece source start"), shape),
                           block(to[j]->view, int64_list_arg(t[3].ptr(), "piece destination start"), shape)});
    }
    std::vector<std::optional<std::intptr_t>> ready(to.size());
    std::map<int, std::intptr_t> used;  // GPUs that ran pieces, and their streams
    for (const Job& job : jobs) {
        const std::intptr_t s = piece_stream(job.out, job.in, streams);
        const Handover source{job.in, from[job.src]->source.ptr(),       job.in.stream(),
                              s,      "stridex.copy (a shard's source)", {}};
        if (sanitizer::on()) sanitizer::observe(source);
        // Both are used on `s`: pool memory behind another framework's owner is found by address.
        handed_to_stream(source);
        handed_to_stream(job.out, nullptr, s);
        std::intptr_t r;
        {
            nb::gil_scoped_release release;
            r = copy_piece(job.out, job.in, streams, s, staged);
        }
        if (s != kNoStream) used[job.out.device().id] = s;
        // A shard is pending when any of its pieces is (all of a GPU shard's run on one stream;
        // one may complete on return, a staged one from pageable memory, while others queue).
        if (!ready[job.dst] || *ready[job.dst] == kNoStream) ready[job.dst] = r;
    }
    if (streams.no_sync) {
        nb::gil_scoped_release release;
        for (const auto& [ordinal, s] : used) cuda::Stream::borrow(cuda::StreamRef(s), ordinal).synchronize();
    }
    for (std::size_t j = 0; j < to.size(); ++j)
        if (ready[j]) to[j]->view.set_stream(streams.no_sync ? kNoStream : *ready[j]);
}

}  // namespace

nb::object copy_sharded(nb::handle dst, nb::handle src, nb::handle stream) {
    if (!g_sharded_type || (is_view(dst.ptr()) && is_view(src.ptr()))) return {};
    const auto sharded = [](nb::handle o) {
        const int r = PyObject_IsInstance(o.ptr(), g_sharded_type);
        if (r < 0) PyErr_Clear();  // a failing check (a hostile __class__) is no ShardedView
        return r == 1;
    };
    if (!sharded(dst) && !sharded(src)) return {};
    return nb::borrow(g_sharded_copy)(dst, src, nb::arg("stream") = stream);
}

void bind_sharded(nb::module_& m) {
    m.def(
        "_sharding_check",
        [](nb::handle shape, nb::handle shards) { return shards_out(layout_arg(shape, shards, "sharding")); },
        nb::arg("shape"), nb::arg("shards"),
        "Checks a block sharding: [(start, stop, place), ...] of a global shape (docs/sharded.md); returns it.");
    m.def(
        "_sharding_grid",
        [](nb::handle shape, nb::handle grid, const std::vector<std::vector<int>>& places) {
            const std::vector<std::int64_t> g = int64_list_arg(grid.ptr(), "grid");
            return shards_out(sh::grid_layout(int64_list_arg(shape.ptr(), "shape"), g, places));
        },
        nb::arg("shape"), nb::arg("grid"), nb::arg("places"),
        "The shards of a grid layout: dimension d cut into grid[d] chunks as torch.chunk, block b held by places[b].");
    m.def(
        "_sharding_chunk",
        [](std::int64_t extent, std::int64_t parts, std::int64_t i) {
            const auto [start, stop] = sh::chunk(extent, parts, i);
            return nb::make_tuple(start, stop);
        },
        nb::arg("extent"), nb::arg("parts"), nb::arg("i"),
        "Chunk i of [0, extent) cut into `parts` as torch.chunk and DTensor's Shard cut: (start, stop).");
    m.def(
        "_sharding_plan",
        [](nb::handle shape, nb::handle src, nb::handle dst) {
            const sh::Layout a = layout_arg(shape, src, "source sharding"),
                             b = layout_arg(shape, dst, "destination sharding");
            nb::list out;
            for (const sh::Piece& p : sh::plan(a, b))
                out.append(nb::make_tuple(p.src, p.dst, to_tuple(p.box.start), to_tuple(p.box.stop),
                                          to_tuple(p.src_box.start), to_tuple(p.dst_box.start)));
            return out;
        },
        nb::arg("shape"), nb::arg("src"), nb::arg("dst"),
        "The pieces (src, dst, start, stop, src_start, dst_start) that fill the destination sharding from the source.");
    m.def("_copy_pieces", &copy_pieces, nb::arg("dst"), nb::arg("src"), nb::arg("pieces"), nb::arg("streams").none(),
          nb::arg("staged") = false,
          "Copies pieces (src, dst, src_start, dst_start, shape) between shard Views with the copy engine.");
    m.def(
        "_register_sharded",
        [](nb::handle type, nb::handle copy) {
            Py_XDECREF(g_sharded_type);
            Py_XDECREF(g_sharded_copy);
            g_sharded_type = nb::borrow(type).release().ptr();
            g_sharded_copy = nb::borrow(copy).release().ptr();
        },
        nb::arg("type"), nb::arg("copy"), "Lets stridex.copy hand instances of `type` to `copy(dst, src, stream=)`.");
}

}  // namespace stridex::python
