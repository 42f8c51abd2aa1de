// stridex::copy: checks, stream ordering, and the choice of path for every pair of memory kinds
// (docs/copy.md has the table). The paths themselves are in copy_kernels.cpp (kernel launches)
// and copy_staging.cpp (pinned staging between pageable host memory and a GPU).
#include <string>
#include <utility>
#include <vector>

#include "copy_internal.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/peer.hpp"
#include "stridex/cuda/pointer.hpp"

namespace stridex {
namespace {

using cuda::Driver;
using cuda::StreamRef;
using detail::CopyPlan;
namespace ce = cuda::copy_engine;

// Below this, a contiguous transfer from pageable memory goes straight to the driver: staging
// only pays once pipelining has something to overlap.
constexpr std::int64_t kStageFrom = std::int64_t{1} << 20;

bool is_gpu(Device d) noexcept { return d.type == DeviceType::kCUDA; }
// Host memory a GPU's DMA engine or kernels cannot use as laid out by the CPU: pageable or pinned.
bool is_host_only(Device d) noexcept { return d.type == DeviceType::kCPU || d.type == DeviceType::kCUDAHost; }

// check_copy (the core's, one set of words for every copy), then the memory the engine reaches.
void check(const View& dst, const View& src) {
    check_copy(dst, src);
    for (Device d : {src.device(), dst.device()})
        if (!d.host_accessible() && !is_gpu(d))
            fail(ErrorKind::unsupported, "stridex copies cpu, cuda, cuda_host and cuda_managed memory, not ", d.name());
}

bool ranges_overlap(const View& a, const View& b) {
    if (a.layout().empty() || b.layout().empty()) return false;
    const Span sa = a.byte_span(), sb = b.byte_span();
    const auto base_a = reinterpret_cast<std::uintptr_t>(a.ptr()), base_b = reinterpret_cast<std::uintptr_t>(b.ptr());
    return base_a + static_cast<std::uintptr_t>(sa.lo) < base_b + static_cast<std::uintptr_t>(sb.hi) &&
           base_b + static_cast<std::uintptr_t>(sb.lo) < base_a + static_cast<std::uintptr_t>(sa.hi);
}

// Pinned host memory, also when its View says cpu (NumPy arrays over torch.pin_memory() buffers,
// say): the DMA engine then reads or writes it directly, with no staging.
bool is_pinned(const View& v) {
    if (v.device().type == DeviceType::kCUDAHost) return true;
    return v.device().type == DeviceType::kCPU && v.size() > 0 &&
           cuda::pointer_info(reinterpret_cast<std::uintptr_t>(v.ptr())).memory_type == cuda::MemoryType::pinned_host;
}

// Blocks the host until a view's pending work is done: only before the host itself reads or writes
// the memory (host copies, staging). Where the DMA engine takes pinned memory, the copy's stream
// waits for the view's instead (wait_for, no host block: docs/copy.md).
void host_wait(const View& v) {
    if (v.stream() != kNoStream && v.device().is_cuda_family()) {
        const int ordinal = is_gpu(v.device()) ? v.device().id : 0;
        // A host wait for work still being captured would wait for nothing (and end the capture).
        if (const cuda::Capture c = cuda::capture_of(StreamRef(v.stream()), ordinal); c.capturing())
            cuda::refuse_in_capture("stridex.copy", StreamRef(v.stream()), c,
                                    "the CPU must read or write " + std::string(v.device().name()) +
                                        " memory whose pending work is captured, which runs only at replay");
    }
    cuda::wait_on_host(v);
}

// Makes `stream` of device `ordinal` wait for the work pending on `view` (an event recorded in
// the context of the view's device, waited on in the copy's; events may cross devices), and for
// its Pending (an imported IPC View's event) too.
void wait_for(const View& view, StreamRef stream, int ordinal) {
    if (!view.device().is_cuda_family()) return;
    if (const auto& pending = view.pending()) pending->order_before(stream.encoded(), Device::cuda(ordinal));
    if (view.stream() == kNoStream) return;
    const int from = is_gpu(view.device()) ? view.device().id : ordinal;
    if (from == ordinal) {
        cuda::order(StreamRef(view.stream()), stream, Device::cuda(ordinal));
        return;
    }
    if (cuda::capture_of(stream, ordinal).capturing()) {
        // order() has the capture rule; the record happens in the context of the view's device,
        // and a capturing `stream` is an explicit handle (never the context's legacy stream).
        cuda::order(StreamRef(view.stream()), stream, Device::cuda(from));
        return;
    }
    cuda::Event event(from);
    event.record(StreamRef(view.stream()));
    event.wait(stream);  // the wait captures the record: the event may be destroyed right after
}

[[noreturn]] void fail_no_kernels(const View& dst, const View& src) {
    fail(ErrorKind::unsupported, "copying ", src.layout(), " on ", src.device().name(), " to ", dst.layout(), " on ",
         dst.device().name(),
         " needs stridex's CUDA copy kernels, and this build has none (built with "
         "STRIDEX_CUDA_KERNELS=OFF); contiguous copies and copies of 2-d row blocks work without them");
}

// Whether a plan is one cuMemcpy2DAsync (try_memcpy_2d below): two axes, rows contiguous on both
// sides, non-negative pitches, rows that do not overlap.
bool is_memcpy_2d(const CopyPlan& p) {
    return p.ndim == 2 && p.axes[1].dst == p.unit && p.axes[1].src == p.unit && p.axes[0].src >= 0 &&
           p.axes[0].src >= p.axes[1].extent * p.unit && p.axes[0].dst >= 0;
}

// Whether a copy between `host` (host memory) and a GPU needs the CPU: pageable memory is staged
// or waited for by the host; pinned memory only when it is neither one block the DMA engine moves
// nor rows of one 2-d copy nor a dense block the kernels reorder (the paths below).
bool needs_cpu(const View& host, const CopyPlan& p) {
    if (!is_pinned(host)) return true;
    if (host.is_packed_subbyte() || p.kind != CopyPlan::Kind::strided) return false;
    return !is_memcpy_2d(p) && !(host.layout().is_dense() && ce::kernels_built());
}

// Inside a capture the copy must be work a graph replays: nothing on the CPU (copy.hpp's contract
// and docs/graphs.md). Refused before anything is enqueued.
// `pooled`: a host side is a block of the pageable pool, which is pageable memory to the caller
// (copies of it complete before returning) even where it is page-locked, so it is refused alike.
void refuse_uncapturable(const View& dst, const View& src, StreamRef run, const cuda::Capture& capture, bool pooled) {
    const auto words = [&](const char* what) {
        return std::string("copying ") + src.device().name() + " to " + dst.device().name() + " " + what;
    };
    if (capture.status == cuda::CaptureStatus::implicit)
        cuda::refuse_in_capture("stridex.copy", run, capture,
                                words("on the legacy default stream, which cannot take part in a capture; pass the "
                                      "capturing stream (stream=...)"));
    const View* host = is_host_only(src.device()) ? &src : is_host_only(dst.device()) ? &dst : nullptr;
    if (host && src.size() > 0 && (pooled || needs_cpu(*host, detail::plan_copy(dst, src))))
        cuda::refuse_in_capture("stridex.copy", run, capture,
                                words(is_pinned(*host) && !pooled
                                          ? "in this layout needs the CPU to pack the host side, "
                                            "which a graph replay cannot run; copy a dense view"
                                          : "needs the CPU (pageable host memory is staged or waited "
                                            "for by the host), which a graph replay cannot run; use "
                                            "pinned memory (cuda_host) or copy outside the capture"));
}

// Whether a host side of the copy lies in the pageable pool's blocks (fresh cpu results), each
// registered with the driver now where the host tuning's policy says so (copy_internal.hpp), and
// never inside a capture (which refuses them). Copies without a host side ask nothing.
bool pooled_host(const View& dst, const View& src, bool capturing) {
    bool pooled = false;
    for (const View* v : {&src, &dst}) {
        if (!is_host_only(v->device()) || v->size() == 0) continue;
        const Span span = v->byte_span();
        const auto policy = capturing ? cuda::detail::HostRegister::never : ce::host_register();
        pooled = cuda::detail::pageable_pool_memory(v->ptr() + span.lo, static_cast<std::size_t>(span.hi - span.lo),
                                                    policy)
                     .pooled ||
                 pooled;
    }
    return pooled;
}

// A copy as one cuMemcpy2DAsync: two axes, rows contiguous on both sides, non-negative pitches.
bool try_memcpy_2d(Driver& d, const CopyPlan& p, const View& dst, const View& src, cuda::CUstream stream) {
    if (p.ndim != 2 || p.axes[1].dst != p.unit || p.axes[1].src != p.unit || p.axes[0].src < 0) return false;
    cuda::Memcpy2D m{};
    m.src_memory_type = m.dst_memory_type = cuda::cu::kMemoryTypeUnified;
    m.src_device = ce::address(src.ptr() + p.src_offset);
    m.dst_device = ce::address(dst.ptr() + p.dst_offset);
    m.src_pitch = static_cast<std::size_t>(p.axes[0].src);
    m.dst_pitch = static_cast<std::size_t>(p.axes[0].dst);
    m.width_in_bytes = static_cast<std::size_t>(p.axes[1].extent * p.unit);
    m.height = static_cast<std::size_t>(p.axes[0].extent);
    if (m.src_pitch < m.width_in_bytes) return false;  // a broadcast row: not a 2-d copy
    d.call("cuMemcpy2DAsync", d.api().memcpy_2d_async, &m, stream);
    return true;
}

// Both sides readable and writable by kernels of `ordinal` (its memory, a peer's with access
// enabled, managed or pinned memory).
void device_copy(Driver& d, const View& dst, const View& src, int ordinal, cuda::CUstream stream) {
    if (ranges_overlap(dst, src)) {
        const ce::Scratch tmp(src.nbytes(), ordinal, stream);
        const View t = ce::scratch_view(tmp, src, ordinal);
        device_copy(d, t, src, ordinal, stream);
        device_copy(d, dst, t, ordinal, stream);
        return;
    }
    const CopyPlan p = detail::plan_copy(dst, src);
    if (p.kind == CopyPlan::Kind::nothing) return;
    if (src.is_packed_subbyte() || p.kind == CopyPlan::Kind::contiguous) {
        const std::int64_t bytes = src.is_packed_subbyte() ? src.nbytes() : p.bytes;
        d.call("cuMemcpyAsync", d.api().memcpy_async, ce::address(dst.ptr() + p.dst_offset),
               ce::address(src.ptr() + p.src_offset), static_cast<std::size_t>(bytes), stream);
        return;
    }
    if (ce::kernels_built()) {
        ce::launch(p, dst.ptr(), src.ptr(), ordinal, stream);
        return;
    }
    if (!try_memcpy_2d(d, p, dst, src, stream)) fail_no_kernels(dst, src);
}

// `bytes` bytes of a view's memory from `offset` past element 0, as a 1-d uint8 view.
View bytes_at(const View& v, std::int64_t offset, std::int64_t bytes) {
    return View(v.data(), v.byte_offset() + offset, Layout::contiguous(std::vector<std::int64_t>{bytes}), dtypes::uint8,
                v.device(), /*readonly=*/false, Owner{});
}

// The bytes a dense view occupies, as one contiguous uint8 view, and a view of the same layout
// placed at the start of `base` (scratch of that many bytes): a dense host view of any order
// (transposed, reversed) crosses the bus as one block and the GPU reorders it.
View raw_block(const View& v) {
    const Span span = v.byte_span();
    return bytes_at(v, span.lo, span.hi - span.lo);
}
View same_layout_at(std::byte* base, const View& v, int ordinal) {
    return View(base, -v.byte_span().lo, v.layout(), v.dtype(), Device::cuda(ordinal), /*readonly=*/false, Owner{},
                v.subbyte_padded());
}

// Queues a plain run of bytes between host and device: direct for pinned memory (and small runs,
// which the driver stages well enough), else through the staging buffers. `device` must be
// C-contiguous. `pending` is the caller's host view, whose recorded stream the host waits for only
// where the host itself touches the bytes (pageable memory): pinned memory is read or written by
// the DMA engine on the copy's stream, which waits for it already. Returns true when the transfer
// is still pending on the stream.
bool transfer(Driver& d, const View& device, const View& host, bool to_device, int ordinal, cuda::CUstream stream,
              const View& pending) {
    const std::int64_t bytes = host.nbytes();
    const bool pinned = is_pinned(host);
    if (!pinned) host_wait(pending);
    if (bytes < kStageFrom || pinned) {
        const void* from = to_device ? static_cast<const void*>(host.ptr()) : device.ptr();
        void* into = to_device ? static_cast<void*>(device.ptr()) : host.ptr();
        d.call("cuMemcpyAsync", d.api().memcpy_async, ce::address(into), ce::address(from),
               static_cast<std::size_t>(bytes), stream);
        return true;
    }
    if (to_device)
        ce::staged_to_device(device, host, ordinal, stream);
    else
        ce::staged_to_host(host, device, ordinal, stream);
    return false;
}

// Host memory (pageable or pinned) to a GPU.
void host_to_gpu(Driver& d, const View& dst, const View& src, int ordinal, cuda::CUstream stream) {
    const CopyPlan p = detail::plan_copy(dst, src);
    if (p.kind == CopyPlan::Kind::nothing) return;
    if (src.is_packed_subbyte() || p.kind == CopyPlan::Kind::contiguous) {
        const std::int64_t bytes = src.is_packed_subbyte() ? src.nbytes() : p.bytes;
        transfer(d, bytes_at(dst, p.dst_offset, bytes), bytes_at(src, p.src_offset, bytes),
                 /*to_device=*/true, ordinal, stream, src);
        return;
    }
    const bool pinned = is_pinned(src);
    if (pinned && try_memcpy_2d(d, p, dst, src, stream)) return;
    if (!ce::kernels_built() && !dst.layout().is_c_contiguous()) fail_no_kernels(dst, src);
    if (src.layout().is_dense() && ce::kernels_built()) {
        const View raw = raw_block(src);
        const ce::Scratch tmp(raw.nbytes(), ordinal, stream);
        transfer(d, ce::scratch_view(tmp, raw, ordinal), raw, /*to_device=*/true, ordinal, stream, src);
        device_copy(d, dst, same_layout_at(tmp.get(), src, ordinal), ordinal, stream);
        return;
    }
    host_wait(src);  // the host packs it into the staging buffers now
    if (dst.layout().is_c_contiguous()) {
        ce::staged_to_device(dst, src, ordinal, stream);
        return;
    }
    const ce::Scratch tmp(src.nbytes(), ordinal, stream);
    const View t = ce::scratch_view(tmp, src, ordinal);
    ce::staged_to_device(t, src, ordinal, stream);
    device_copy(d, dst, t, ordinal, stream);
}

// A GPU to host memory. Returns true when the copy is still pending on the stream.
bool gpu_to_host(Driver& d, const View& dst, const View& src, int ordinal, cuda::CUstream stream) {
    const CopyPlan p = detail::plan_copy(dst, src);
    if (p.kind == CopyPlan::Kind::nothing) return false;
    if (src.is_packed_subbyte() || p.kind == CopyPlan::Kind::contiguous) {
        const std::int64_t bytes = src.is_packed_subbyte() ? src.nbytes() : p.bytes;
        return transfer(d, bytes_at(src, p.src_offset, bytes), bytes_at(dst, p.dst_offset, bytes),
                        /*to_device=*/false, ordinal, stream, dst);
    }
    const bool pinned = is_pinned(dst);
    if (pinned && try_memcpy_2d(d, p, dst, src, stream)) return true;
    if (!ce::kernels_built() && !src.layout().is_c_contiguous()) fail_no_kernels(dst, src);
    if (dst.layout().is_dense() && ce::kernels_built()) {
        const View raw = raw_block(dst);
        const ce::Scratch tmp(raw.nbytes(), ordinal, stream);
        device_copy(d, same_layout_at(tmp.get(), dst, ordinal), src, ordinal, stream);
        return transfer(d, ce::scratch_view(tmp, raw, ordinal), raw, /*to_device=*/false, ordinal, stream, dst);
    }
    host_wait(dst);  // the host unpacks the staging buffers into it
    if (src.layout().is_c_contiguous()) {
        ce::staged_to_host(dst, src, ordinal, stream);
        return false;
    }
    const ce::Scratch tmp(src.nbytes(), ordinal, stream);
    const View t = ce::scratch_view(tmp, src, ordinal);
    device_copy(d, t, src, ordinal, stream);
    ce::staged_to_host(dst, t, ordinal, stream);
    return false;
}

// Between two GPUs: one peer memcpy when contiguous, else kernels on dst's GPU reading src's.
void peer_copy(Driver& d, const View& dst, const View& src, int ordinal, cuda::CUstream stream) {
    const CopyPlan p = detail::plan_copy(dst, src);
    if (p.kind == CopyPlan::Kind::nothing) return;
    const int peer = src.device().id;
    if (src.is_packed_subbyte() || p.kind == CopyPlan::Kind::contiguous) {
        const std::int64_t bytes = src.is_packed_subbyte() ? src.nbytes() : p.bytes;
        d.call("cuMemcpyPeerAsync", d.api().memcpy_peer_async, ce::address(dst.ptr() + p.dst_offset),
               d.primary_context(ordinal), ce::address(src.ptr() + p.src_offset), d.primary_context(peer),
               static_cast<std::size_t>(bytes), stream);
        return;
    }
    if (!cuda::peer_access(ordinal, peer))
        fail(ErrorKind::unsupported, "strided copy from ", src.device().name(), " to ", dst.device().name(),
             ": the GPUs have no peer access; copy to a contiguous view on either side first");
    device_copy(d, dst, src, ordinal, stream);
}

}  // namespace

std::intptr_t copy(const View& dst, const View& src, std::intptr_t stream) {
    check(dst, src);
    const Device sd = src.device(), dd = dst.device();
    if (sd.host_accessible() && dd.host_accessible()) {
        // Host to host: the CPU copies now, whatever `stream` says, and the stream is never asked
        // anything (it may be any caller's value for a copy that enqueues nothing). Pending GPU
        // work on either side is waited for first, which host_wait refuses inside a capture.
        host_wait(src);
        host_wait(dst);
        detail::copy_host_checked(dst, src);
        return kNoStream;
    }
    // The copy runs on dst's GPU when dst is GPU memory, else on src's.
    const int ordinal = is_gpu(dd) ? dd.id : sd.id;
    const StreamRef run(stream == kNoStream ? kDefaultStream : stream);
    Driver& d = cuda::driver();
    const cuda::ContextGuard guard(d, ordinal);
    const cuda::CUstream handle = run.handle();
    const cuda::Capture capture = cuda::capture_of(run, ordinal);
    // An invalidated capture is left to the driver, which reports the capture's first error.
    const bool capturing = capture.active() || capture.status == cuda::CaptureStatus::implicit;
    // The pageable pool's blocks are page-locked when reused (docs/memory.md; none in a capture,
    // which refuses them), after which the DMA engine moves them like pinned memory.
    const bool pooled = pooled_host(dst, src, capturing);
    if (capturing) refuse_uncapturable(dst, src, run, capture, pooled);
    wait_for(src, run, ordinal);
    wait_for(dst, run, ordinal);
    // Pool memory used on a stream other than its allocation stream is freed after this copy.
    cuda::note_use(src.owner(), handle, ordinal);
    cuda::note_use(dst.owner(), handle, ordinal);
    bool pending = true;
    if (src.size() == 0) {
        pending = false;
    } else if (is_gpu(sd) && is_gpu(dd) && sd.id != dd.id) {
        peer_copy(d, dst, src, ordinal, handle);
    } else if (is_host_only(sd) && is_gpu(dd)) {
        host_to_gpu(d, dst, src, ordinal, handle);
    } else if (is_gpu(sd) && is_host_only(dd)) {
        pending = gpu_to_host(d, dst, src, ordinal, handle);
    } else {
        device_copy(d, dst, src, ordinal, handle);  // one GPU and managed memory, or the GPU itself
    }
    // The graph reads src and writes dst at every replay: both stay alive as long as it does.
    if (capture.active()) {
        cuda::keep_alive_in_capture(capture, src.owner());
        cuda::keep_alive_in_capture(capture, dst.owner());
    }
    if (!pending) return kNoStream;
    // A pool block is pageable memory to its user: the copy completes before returning, as staged
    // copies do, so the block is never used by queued work once its View is gone.
    if (stream == kNoStream || pooled) {
        cuda::Stream::borrow(run, ordinal).synchronize();
        return kNoStream;
    }
    return stream;
}

View copy_to(const View& src, Device device, Order order, std::intptr_t stream, const Allocator* allocator) {
    View out = detail::allocate_like(src, device, order, stream, allocator);
    out.set_stream(copy(out, src, stream));
    return out;
}

Order parse_order(std::string_view letter) {
    if (letter == "C") return Order::C;
    if (letter == "F") return Order::F;
    if (letter == "K") return Order::K;
    fail(ErrorKind::value, "order must be 'C', 'F' or 'K', found '", excerpt(letter), "'");
}

View contiguous(const View& src, std::intptr_t stream, const Allocator* allocator) {
    if (src.layout().is_c_contiguous()) return src;
    return copy_to(src, src.device(), Order::C, stream, allocator);
}

View to_device(const View& src, Device device, std::intptr_t stream, const Allocator* allocator) {
    if (device == src.device()) return src;
    return copy_to(src, device, Order::K, stream, allocator);
}

}  // namespace stridex
