// Host <-> device copies through pinned staging buffers, for host memory the DMA engine cannot
// move as laid out (strided views, and pageable memory, which the driver would otherwise stage
// itself through one small buffer at a time).
//
// The host side is walked in C order in pieces of at most one staging buffer. To the device, each
// piece is packed into a free buffer (by up to 16 threads) and its transfer queued at once, so
// packing piece k+1 overlaps the DMA of piece k; a buffer is reused only after the event recorded
// behind its last transfer has completed. To the host, the transfers of the first buffers are
// queued up front and each piece is unpacked as soon as its transfer completes, while the next ones
// are in flight. The device side is always C-contiguous (the engine gathers into or scatters from
// scratch memory with a kernel otherwise), so a piece is one contiguous byte range there.
//
// To the host, the pageable side is written with non-temporal (streaming) stores where it is a long
// run: it is not read again by this copy, and a plain store would first read every destination line
// into the cache, a third pass over host memory. To the device, the staging buffer is written with
// plain stores: the DMA engine reads it right away, partly from the cache.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "copy_internal.hpp"

namespace stridex::cuda::copy_engine {
namespace {

// Pieces below this are packed by the calling thread alone: waking workers costs more.
constexpr std::int64_t kParallelBytes = std::int64_t{1} << 20;
// Runs shorter than this are copied with plain stores (streaming stores pay off on long runs).
constexpr std::size_t kStreamMin = std::size_t{4} << 10;

// A fixed set of worker threads that run the parts of one job at a time, the caller included.
class Workers {
public:
    static Workers& instance() {
        // Leaked on purpose: the threads outlive static destruction (they only ever wait).
        static Workers* const workers = new Workers(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
        return *workers;
    }
    int size() const noexcept { return static_cast<int>(threads_.size()) + 1; }

    // Calls part(i) for every i in [0, parts), spread over the workers; rethrows the first error.
    void run(int parts, const std::function<void(int)>& part) {
        const std::lock_guard job_lock(job_mutex_);  // one job at a time
        {
            const std::lock_guard lock(mutex_);
            part_ = &part;
            parts_ = parts;
            next_ = 0;
            pending_ = parts;
            error_ = nullptr;
            generation_.fetch_add(1, std::memory_order_release);
        }
        wake_.notify_all();
        work();
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return pending_ == 0; });
        part_ = nullptr;
        if (error_) std::rethrow_exception(error_);
    }

private:
    explicit Workers(unsigned count) {
        for (unsigned i = 1; i < count; ++i) threads_.emplace_back([this] { loop(); });
        for (auto& t : threads_) t.detach();
    }

    void loop() {
        unsigned long seen = 0;
        for (;;) {
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
                seen = generation_.load(std::memory_order_relaxed);
            }
            work();
        }
    }

    void work() {
        for (;;) {
            int i;
            const std::function<void(int)>* part;
            {
                const std::lock_guard lock(mutex_);
                if (next_ >= parts_) return;
                i = next_++;
                part = part_;
            }
            try {
                (*part)(i);
            } catch (...) {
                const std::lock_guard lock(mutex_);
                if (!error_) error_ = std::current_exception();
            }
            const std::lock_guard lock(mutex_);
            if (--pending_ == 0) done_.notify_all();
        }
    }

    std::vector<std::thread> threads_;
    std::mutex job_mutex_, mutex_;
    std::condition_variable wake_, done_;
    const std::function<void(int)>* part_ = nullptr;
    int parts_ = 0, next_ = 0, pending_ = 0;
    std::atomic<unsigned long> generation_{0};
    std::exception_ptr error_;
};

// memcpy with non-temporal stores for the 16-byte-aligned body of a long run (x86-64; elsewhere
// memcpy). The stores are fenced before returning: the bytes are visible to the DMA engine and to
// the thread that joins this one.
void stream_copy(std::byte* d, const std::byte* s, std::size_t n) noexcept {
#if defined(__SSE2__)
    if (n >= kStreamMin) {
        const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
        std::memcpy(d, s, head);
        d += head;
        s += head;
        n -= head;
        const std::size_t body = n / 64 * 64;
        for (std::size_t i = 0; i < body; i += 64) {
            const auto* from = reinterpret_cast<const __m128i*>(s + i);
            auto* into = reinterpret_cast<__m128i*>(d + i);
            const __m128i a = _mm_loadu_si128(from), b = _mm_loadu_si128(from + 1), c = _mm_loadu_si128(from + 2),
                          e = _mm_loadu_si128(from + 3);
            _mm_stream_si128(into, a);
            _mm_stream_si128(into + 1, b);
            _mm_stream_si128(into + 2, c);
            _mm_stream_si128(into + 3, e);
        }
        _mm_sfence();
        d += body;
        s += body;
        n -= body;
    }
#endif
    std::memcpy(d, s, n);
}

// copy_host, with streaming stores for runs contiguous on both sides (the whole piece, or each
// row of a strided one); other layouts go to copy_host as they are.
void copy_piece(const View& dst, const View& src, bool streaming) {
    if (!streaming || src.is_packed_subbyte()) {
        copy_host(dst, src);
        return;
    }
    const stridex::detail::CopyPlan p = stridex::detail::plan_copy(dst, src);
    std::byte* const d0 = dst.ptr() + p.dst_offset;
    const std::byte* const s0 = src.ptr() + p.src_offset;
    if (p.kind == stridex::detail::CopyPlan::Kind::nothing) return;
    if (p.kind == stridex::detail::CopyPlan::Kind::contiguous) {
        stream_copy(d0, s0, static_cast<std::size_t>(p.bytes));
        return;
    }
    const stridex::detail::CopyAxis& inner = p.axes[p.ndim - 1];
    const auto row = static_cast<std::size_t>(inner.extent * p.unit);
    if (inner.dst != p.unit || inner.src != p.unit || row < kStreamMin) {
        copy_host(dst, src);
        return;
    }
    // An odometer over the outer axes (the last fastest), as the core's host copy walks them.
    std::int64_t index[kMaxNdim + 1] = {};
    std::byte* d = d0;
    const std::byte* s = s0;
    for (;;) {
        stream_copy(d, s, row);
        int a = p.ndim - 2;
        for (; a >= 0; --a) {
            if (++index[a] < p.axes[a].extent) {
                d += p.axes[a].dst;
                s += p.axes[a].src;
                break;
            }
            index[a] = 0;
            d -= (p.axes[a].extent - 1) * p.axes[a].dst;
            s -= (p.axes[a].extent - 1) * p.axes[a].src;
        }
        if (a < 0) return;
    }
}

// copy_piece, split along the first axis over up to `threads` workers when the piece is large.
void parallel_copy_host(const View& dst, const View& src, const HostTuning& tuning, bool streaming) {
    const std::int64_t bytes = src.size() * src.itemsize();
    Workers& w = Workers::instance();
    const int threads = std::min(w.size(), tuning.threads);
    if (bytes < kParallelBytes || src.ndim() == 0 || src.shape()[0] < 2 || threads <= 1) {
        copy_piece(dst, src, streaming);
        return;
    }
    const std::int64_t rows = src.shape()[0];
    const int parts = static_cast<int>(std::min<std::int64_t>(rows, threads));
    w.run(parts, [&](int i) {
        const Slice s{rows * i / parts, rows * (i + 1) / parts, 1};
        copy_piece(dst.slice(0, s), src.slice(0, s), streaming);
    });
}

struct Piece {
    View view;
    std::int64_t offset;  // elements before it, in C order
};

// The view cut in C order into pieces of at most max_elements.
void split(const View& v, std::int64_t max_elements, std::int64_t offset, std::vector<Piece>& out) {
    if (v.size() <= max_elements || v.ndim() == 0) {
        out.push_back({v, offset});
        return;
    }
    const std::int64_t rows = v.shape()[0];
    const std::int64_t row = v.size() / rows;
    if (row <= max_elements) {
        const std::int64_t step = max_elements / row;
        for (std::int64_t i = 0; i < rows; i += step)
            out.push_back({v.slice(0, Slice{i, std::min(rows, i + step), 1}), offset + i * row});
        return;
    }
    for (std::int64_t i = 0; i < rows; ++i) split(v.index(0, i), max_elements, offset + i * row, out);
}

std::vector<Piece> pieces_of(const View& host, std::int64_t stage_bytes) {
    // Fewer, longer axes first (same elements, same C order), so pieces are as large as allowed.
    const View merged(host.data(), host.byte_offset(), host.layout().merged(), host.dtype(), Device::cpu(),
                      /*readonly=*/false, Owner{}, host.subbyte_padded());
    std::vector<Piece> out;
    split(merged, std::max<std::int64_t>(1, stage_bytes / host.itemsize()), 0, out);
    return out;
}

struct Stage {
    void* host = nullptr;
    CUevent done = nullptr;
};

struct Pool {
    std::mutex mutex;  // one staged copy per device at a time
    std::vector<Stage> stages;
    std::int64_t stage_bytes = 0;
};

// The staging buffers of each driver's devices (the process's libcuda, or a test's fake), allocated
// on first use and kept for the process.
std::mutex& pools_mutex() {
    static std::mutex mutex;
    return mutex;
}
std::map<Driver*, std::vector<std::unique_ptr<Pool>>>& all_pools() {
    static auto* pools = new std::map<Driver*, std::vector<std::unique_ptr<Pool>>>();  // never destroyed
    return *pools;
}

Pool& pool_for(Driver& d, int ordinal) {
    const std::lock_guard lock(pools_mutex());
    auto& pools = all_pools()[&d];
    if (pools.size() < static_cast<std::size_t>(d.device_count()))
        pools.resize(static_cast<std::size_t>(d.device_count()));
    auto& pool = pools.at(static_cast<std::size_t>(ordinal));
    if (!pool) pool = std::make_unique<Pool>();
    return *pool;
}

// At least `count` buffers of at least `bytes` each. Buffers are only ever grown: smaller ones
// are freed first (once their last transfer completed) when a larger stage is asked for, and a
// smaller stage uses the front of the buffers it finds.
void fill(Pool& pool, Driver& d, std::int64_t bytes, std::size_t count) {
    if (pool.stage_bytes < bytes) {
        for (const Stage& s : pool.stages) {
            d.call("cuEventSynchronize", d.api().event_synchronize, s.done);
            (void)d.try_call(d.raw().event_destroy, s.done);
            (void)d.try_call(d.raw().mem_free_host, s.host);
        }
        pool.stages.clear();
        pool.stage_bytes = bytes;
    }
    while (pool.stages.size() < count) {
        Stage s;
        d.call("cuMemHostAlloc", d.api().mem_host_alloc, &s.host, static_cast<std::size_t>(pool.stage_bytes),
               cu::kMemHostAllocPortable);
        const CUresult r = d.api().event_create ? d.api().event_create(&s.done, cu::kEventDisableTiming)
                                                : result::not_found;
        if (r != result::success) {
            d.try_call(d.raw().mem_free_host, s.host);
            d.fail_call("cuEventCreate", r);
        }
        pool.stages.push_back(s);
    }
}

View staging_view(const Stage& s, const Piece& p) {
    return View(s.host, 0, Layout::contiguous(p.view.shape()), p.view.dtype(), Device::cpu(),
                /*readonly=*/false, Owner{}, p.view.subbyte_padded());
}

// One staged transfer: the device's context, its pool held for the whole transfer, the host view
// cut into pieces of a stage each, and the asynchronous DMA of piece k through its stage.
struct StagedTransfer {
    Driver& d = driver();
    const ContextGuard guard;
    const HostTuning tuning;
    Pool& pool;
    const std::lock_guard<std::mutex> lock;
    const std::vector<Piece> pieces;
    const std::int64_t item;

    StagedTransfer(const View& host, int ordinal)
        : guard(d, ordinal),
          tuning(host_tuning()),
          pool(pool_for(d, ordinal)),
          lock(pool.mutex),
          pieces(pieces_of(host, tuning.stage_bytes)),
          item(host.itemsize()) {
        fill(pool, d, tuning.stage_bytes, tuning.stages);
    }
    std::size_t stages() const { return tuning.stages; }
    const Stage& stage(std::size_t k) const { return pool.stages[k % tuning.stages]; }
    CUdeviceptr on_device(const View& device, std::size_t k) const {
        return address(device.ptr() + pieces[k].offset * item);
    }
    // Queues the copy of piece k (dst <- src) on `stream` and marks its stage busy until it is done.
    void dma(std::size_t k, CUdeviceptr dst, CUdeviceptr src, CUstream stream) const {
        const auto bytes = static_cast<std::size_t>(pieces[k].view.size() * item);
        d.call("cuMemcpyAsync", d.api().memcpy_async, dst, src, bytes, stream);
        d.call("cuEventRecord", d.api().event_record, stage(k).done, stream);
    }
    void wait(std::size_t k) const { d.call("cuEventSynchronize", d.api().event_synchronize, stage(k).done); }
};

}  // namespace

void forget_staging(Driver& d) noexcept {
    const std::lock_guard lock(pools_mutex());
    all_pools().erase(&d);  // its buffers went with that driver (a test's fake)
}

void staged_to_device(const View& device, const View& host, int ordinal, CUstream stream) {
    const StagedTransfer t(host, ordinal);
    for (std::size_t k = 0; k < t.pieces.size(); ++k) {
        t.wait(k);  // the stage's last transfer is done
        parallel_copy_host(staging_view(t.stage(k), t.pieces[k]), t.pieces[k].view, t.tuning, t.tuning.pack_streaming);
        t.dma(k, t.on_device(device, k), address(t.stage(k).host), stream);
    }
}

void staged_to_host(const View& host, const View& device, int ordinal, CUstream stream) {
    const StagedTransfer t(host, ordinal);
    auto issue = [&](std::size_t k) { t.dma(k, address(t.stage(k).host), t.on_device(device, k), stream); };
    for (std::size_t k = 0; k < std::min(t.stages(), t.pieces.size()); ++k) issue(k);
    for (std::size_t k = 0; k < t.pieces.size(); ++k) {
        t.wait(k);
        parallel_copy_host(t.pieces[k].view, staging_view(t.stage(k), t.pieces[k]), t.tuning, t.tuning.streaming);
        if (k + t.stages() < t.pieces.size()) issue(k + t.stages());
    }
}

}  // namespace stridex::cuda::copy_engine
