// The stream-ordered device pools: one per GPU, the blocks a View holds, the memory a CUDA graph
// owns, and note_use (memory.hpp, docs/memory.md). What the allocators share is pool_internal.hpp.
//
// Reuse across streams: a pool made by cuMemPoolCreate starts with its three reuse attributes on
// (CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, _ALLOW_OPPORTUNISTIC,
// _ALLOW_INTERNAL_DEPENDENCIES) and stridex keeps them: each lets the driver hand a block freed on
// stream A to an allocation on stream B only when the free is known to be ordered before it (an
// event B already waits on, the free observed complete, or a dependency the driver inserts into
// B). None lets a later writer on B overtake work queued on A before the free, and the release
// below makes every other stream that used the memory a predecessor of the free (note_use), so the
// same holds for readers on those streams.
#include <unistd.h>

#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "pool_internal.hpp"
#include "side_stream.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/stream.hpp"

namespace stridex::cuda {

using namespace pools;  // the shared blocks and pools (pool_internal.hpp)

namespace {

// Creates GPU `ordinal`'s pool: shareable through POSIX file descriptors where the driver allows
// it (so pickled results cross processes, docs/distributed.md), else private, saying why. The
// release threshold UINT64_MAX keeps freed memory cached until trim_device_pool.
DevicePool& device_pool(Driver& d, int ordinal) {
    Pools& all = pools_of(d);
    if (ordinal >= 0 && static_cast<std::size_t>(ordinal) < all.fast.size())
        if (DevicePool* p = all.fast[static_cast<std::size_t>(ordinal)].load(std::memory_order_acquire)) return *p;
    if (ordinal < 0 || ordinal >= d.device_count() || static_cast<std::size_t>(ordinal) >= all.fast.size())
        fail(ErrorKind::value, "no CUDA device ", ordinal, ": this machine has ", d.device_count());
    const std::lock_guard lock(all.mutex);
    if (DevicePool* p = all.fast[static_cast<std::size_t>(ordinal)].load(std::memory_order_acquire)) return *p;
    auto pool = std::make_unique<DevicePool>();
    const DriverTable& api = d.api();
    d.require("cuMemPoolCreate", api.mem_pool_create);
    MemPoolProps props{};
    props.alloc_type = cu::kMemAllocationTypePinned;
    props.handle_types = cu::kMemHandleTypePosixFileDescriptor;
    props.location = {cu::kMemLocationTypeDevice, ordinal};
    if (const CUresult r = api.mem_pool_create(&pool->pool, &props); r == result::success) {
        pool->shareable = true;
    } else {
        pool->not_shareable = "the driver refused a pool with POSIX file descriptor handles (" + d.describe(r) + ")";
        props.handle_types = cu::kMemHandleTypeNone;
        d.call("cuMemPoolCreate", api.mem_pool_create, &pool->pool, &props);
    }
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    d.call("cuMemPoolSetAttribute", api.mem_pool_set_attribute, pool->pool, cu::kMemPoolReleaseThreshold,
           static_cast<void*>(&keep));
    DevicePool* raw = pool.get();
    all.devices.push_back(std::move(pool));
    all.fast[static_cast<std::size_t>(ordinal)].store(raw, std::memory_order_release);
    return *raw;
}

std::uint64_t pool_attribute(Driver& d, CUmemoryPool pool, int attribute) noexcept {
    std::uint64_t value = 0;
    if (d.try_call(d.raw().mem_pool_get_attribute, pool, attribute, static_cast<void*>(&value)) != result::success)
        return 0;
    return value;
}

[[noreturn]] void fail_out_of_memory(Driver& d, const DevicePool& pool, int ordinal, std::size_t bytes) {
    std::size_t free_bytes = 0, total = 0;
    (void)d.try_call(d.raw().mem_get_info, &free_bytes, &total);
    fail(ErrorKind::memory, "cuda:", ordinal, ": out of memory allocating ", bytes, " bytes (stridex's pool holds ",
         pool_attribute(d, pool.pool, cu::kMemPoolReservedMemCurrent), " bytes, ",
         pool.in_use.load(std::memory_order_relaxed), " in use; the GPU has ", free_bytes, " of ", total,
         " bytes free)");
}

void release_device(void* context) noexcept {
    const std::unique_ptr<DeviceBlock> b(static_cast<DeviceBlock*>(context));
    if (::getpid() != b->pid) return;  // a forked child: the parent's block, not ours to free
    {
        const std::lock_guard lock(b->pool->blocks_mutex);
        b->pool->blocks.erase(b->ptr);
    }
    b->pool->in_use.fetch_sub(b->bytes, std::memory_order_relaxed);
    b->pool->live.fetch_sub(1, std::memory_order_relaxed);
    Driver& d = *b->driver;
    if (!d.usable()) return;
    try {
        const DriverTable& api = d.raw();
        bool ordered = true;
        // Every other stream that used the block becomes a predecessor of the free: an event on
        // it (made in its device's context), waited for by the allocation stream (queued, never
        // waited on by the host).
        for (const Use& u : b->others) {
            const ContextGuard on(d, u.ordinal);
            CUevent e = d.acquire_event(u.ordinal);
            ordered = ordered && d.try_call(api.event_record, e, u.stream) == result::success &&
                      d.try_call(api.stream_wait_event, b->home, e, 0u) == result::success;
            d.release_event(u.ordinal, e);
        }
        const ContextGuard guard(d, b->ordinal);
        const CUresult r = ordered ? d.try_call(api.mem_free_async, b->ptr, b->home) : result::invalid_handle;
        if (r == result::success || r == result::deinitialized) return;  // deinitialized: exit, nothing to free
        // The allocation stream is gone (destroyed by its owner) or an event could not be ordered:
        // the synchronous free waits for the device and still returns the block to its pool.
        (void)d.try_call(api.mem_free, b->ptr);
    } catch (...) {  // no context (the driver is shutting down): nothing left to free
    }
}

// A block of GPU `ordinal`'s pool on `stream`, which must not be capturing.
Allocation allocate_from_pool(Driver& d, std::size_t bytes, int ordinal, CUstream stream) {
    const DriverTable& api = d.raw();
    DevicePool& pool = device_pool(d, ordinal);
    auto block = std::make_unique<DeviceBlock>();
    block->driver = &d;
    block->pool = &pool;
    block->bytes = bytes;
    block->ordinal = ordinal;
    block->pid = ::getpid();
    block->home = stream;
    d.require("cuMemAllocFromPoolAsync", api.mem_alloc_from_pool_async);
    CUresult r = api.mem_alloc_from_pool_async(&block->ptr, bytes, pool.pool, stream);
    if (r == result::out_of_memory) {
        // Cached blocks of other streams may be what is missing: return them and retry once.
        (void)d.try_call(api.mem_pool_trim_to, pool.pool, std::size_t{0});
        r = api.mem_alloc_from_pool_async(&block->ptr, bytes, pool.pool, stream);
    }
    if (r == result::out_of_memory) fail_out_of_memory(d, pool, ordinal, bytes);
    if (r == result::invalid_handle || r == result::invalid_context)
        fail(ErrorKind::value, "cuda:", ordinal, ": cannot allocate on stream ",
             hex(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(stream))),
             ": the stream is invalid or destroyed, or belongs to another device (", d.describe(r), ")");
    if (r != result::success) d.fail_call("cuMemAllocFromPoolAsync", r);
    {
        const std::lock_guard lock(pool.blocks_mutex);
        try {
            pool.blocks.emplace(block->ptr, block.get());
        } catch (...) {  // no memory for the entry: give the block back on its stream, then fail
            (void)d.try_call(api.mem_free_async, block->ptr, stream);
            throw;
        }
    }
    raise_max(pool.peak, pool.in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    pool.live.fetch_add(1, std::memory_order_relaxed);
    void* data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(block->ptr));
    Owner owner = owner_of_block(std::move(block), &release_device);
    return {data, std::move(owner)};
}

// ---- memory a CUDA graph owns --------------------------------------------------------------------
//
// A graph may be instantiated by any API: torch (with auto-free-on-launch), CuPy, cuda.core or
// cudaGraphInstantiate(..., 0) (without). A memory-allocation node whose memory is not freed inside
// the graph makes every launch after the first fail unless the graph was instantiated with
// auto-free-on-launch, and stridex cannot know, when it allocates, whether the result will be
// dropped inside the capture. So nothing stridex allocates while a stream captures is a node: it is
// a block of the device's pool, allocated outside the graph on stridex's private stream, which the
// graph waits for (an external event, capture.hpp), and which the graph keeps (its capture's arena,
// retained by the graph as a user object), as torch's static outputs are kept: every launch
// rewrites the same memory. A View of it holds a lease. A lease dropped while its capture still
// runs returns the block to the arena, and a later allocation of the same capture on the same
// stream reuses it (captured work on one stream runs in order, so the new user's work comes after
// the old one's: freed inside the graph). A lease dropped after the capture leaves the block to
// the graph. The block goes back to the pool once the graph is destroyed (the driver releases a
// graph's user objects after its launches completed) and no lease of it is left.

struct CaptureArena {
    Driver* driver;
    unsigned long long id;  // the capture's id
    CUstream stream;        // the capturing stream it was made for
    int ordinal;
    std::mutex mutex;                        // guards the two lists
    std::vector<Owner> blocks;               // every block allocated in the capture: the graph's
    std::multimap<std::size_t, Owner> idle;  // blocks whose lease went while the capture still ran
    ~CaptureArena();
};

std::mutex& arena_mutex() {
    static auto* m = new std::mutex();  // never destroyed: a graph may be released during exit
    return *m;
}
using ArenaKey = std::pair<const Driver*, unsigned long long>;
std::map<ArenaKey, std::weak_ptr<CaptureArena>>& arenas() {
    static auto* a = new std::map<ArenaKey, std::weak_ptr<CaptureArena>>();  // never destroyed, as above
    return *a;
}

CaptureArena::~CaptureArena() {
    const std::lock_guard lock(arena_mutex());
    const auto it = arenas().find({driver, id});
    if (it != arenas().end() && it->second.expired()) arenas().erase(it);
}

// The arena of `capture`, made (and handed to the capture's graph) by its first allocation.
std::shared_ptr<CaptureArena> capture_arena(Driver& d, const Capture& capture, int ordinal, CUstream stream) {
    {
        const std::lock_guard lock(arena_mutex());
        if (auto found = arenas()[{&d, capture.id}].lock()) return found;
    }
    auto arena = std::make_shared<CaptureArena>();
    arena->driver = &d;
    arena->id = capture.id;
    arena->stream = stream;
    arena->ordinal = ordinal;
    keep_alive_in_capture(capture, Owner::from_action([kept = arena]() noexcept {}));  // the graph's reference
    const std::lock_guard lock(arena_mutex());
    arenas()[{&d, capture.id}] = arena;
    return arena;
}

struct Lease {
    Owner block;
    std::weak_ptr<CaptureArena> arena;
    DeviceBlock* raw;
};

DeviceBlock* block_of(const Owner& owner) noexcept;

void release_lease(void* context) noexcept {
    const std::unique_ptr<Lease> lease(static_cast<Lease*>(context));
    const std::shared_ptr<CaptureArena> arena = lease->arena.lock();
    if (!arena || ::getpid() != lease->raw->pid) return;
    try {
        DeviceBlock& b = *lease->raw;
        {
            const std::lock_guard lock(b.mutex);
            if (b.shared_in_capture || !b.others.empty()) return;  // used elsewhere: only the graph's now
        }
        const Capture now = capture_of(StreamRef::from_handle(b.capture_stream), b.ordinal);
        if (!now.active() || now.id != arena->id) return;  // the capture ended: the graph keeps it
        const std::lock_guard lock(arena->mutex);
        arena->idle.emplace(b.bytes, std::move(lease->block));
    } catch (...) {  // no driver or no memory: the block stays the graph's
    }
}

// Relaxes this thread's capture mode for the calls stridex makes outside a capture while one runs
// (an allocation on its private stream): under cudaStreamCaptureModeGlobal the driver refuses
// them on any thread (torch's allocator does the same around cudaMalloc).
class RelaxedCapture {
public:
    explicit RelaxedCapture(Driver& d) noexcept : exchange_(d.raw().thread_exchange_stream_capture_mode) {
        relaxed_ = exchange_ && exchange_(&mode_) == result::success;
    }
    ~RelaxedCapture() {
        if (relaxed_) (void)exchange_(&mode_);
    }
    RelaxedCapture(const RelaxedCapture&) = delete;
    RelaxedCapture& operator=(const RelaxedCapture&) = delete;

private:
    static constexpr int kRelaxed = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED
    CUresult (*exchange_)(int*);
    int mode_ = kRelaxed;
    bool relaxed_ = false;
};

Allocation allocate_in_capture(Driver& d, std::size_t bytes, int ordinal, CUstream stream, const Capture& capture) {
    const std::shared_ptr<CaptureArena> arena = capture_arena(d, capture, ordinal, stream);
    Owner block;
    {
        // An idle block of the same stream, no larger than twice the request.
        const std::lock_guard lock(arena->mutex);
        for (auto it = arena->idle.lower_bound(bytes); it != arena->idle.end() && it->first <= 2 * bytes; ++it)
            if (block_of(it->second)->capture_stream == stream) {
                block = std::move(it->second);
                arena->idle.erase(it);
                break;
            }
    }
    if (!block) {
        const StreamRef capturing = StreamRef::from_handle(stream);
        Allocation fresh;
        {
            const RelaxedCapture relaxed(d);
            const StreamRef side = side_stream(ordinal);
            fresh = allocate_from_pool(d, bytes, ordinal, side.handle());
            DeviceBlock* b = block_of(fresh.owner);
            b->capture = capture.id;
            b->capture_stream = stream;
            // Every launch runs after the allocation on the private stream.
            wait_across_capture(side, capturing, capture, ordinal);
        }
        block = fresh.owner;
        const std::lock_guard lock(arena->mutex);
        arena->blocks.push_back(std::move(fresh.owner));
    }
    DeviceBlock* raw = block_of(block);
    auto lease = std::make_unique<Lease>(Lease{std::move(block), arena, raw});
    Owner owner = Owner::from_callback(&release_lease, lease.get());
    (void)lease.release();
    return {reinterpret_cast<void*>(static_cast<std::uintptr_t>(raw->ptr)), std::move(owner)};
}

// The pool block an owner keeps alive (its own or through a lease), or nullptr.
DeviceBlock* block_of(const Owner& owner) noexcept {
    if (void* c = owner.callback_context(&release_device)) return static_cast<DeviceBlock*>(c);
    if (void* c = owner.callback_context(&release_lease)) return static_cast<Lease*>(c)->raw;
    return nullptr;
}

// Work on `stream` uses block `b`: its free waits for that stream (an event at the release).
void note_block_use(DeviceBlock& b, CUstream stream, int ordinal, const Owner& keep) noexcept {
    if (b.home == stream) return;
    if (b.capture != 0) {
        // Work its own graph's capture queues runs at the graph's launches, which complete before
        // the graph lets the block go: no event for it (and none may be recorded on a stream that
        // is capturing then).
        try {
            const Capture c = capture_of(StreamRef::from_handle(stream), ordinal);
            if (c.active() && c.id == b.capture) {
                if (stream != b.capture_stream) {
                    const std::lock_guard lock(b.mutex);
                    b.shared_in_capture = true;
                }
                return;
            }
        } catch (...) {  // the query failed: note it as any stream
        }
    }
    const std::lock_guard lock(b.mutex);
    for (Use& u : b.others)
        if (u.stream == stream) {
            if (!u.keep) u.keep = keep;
            return;
        }
    try {
        b.others.push_back({stream, ordinal, keep});
    } catch (...) {  // no memory for the record: the free cannot be ordered after this stream
    }
}

}  // namespace

bool pools::note_device_use(const Owner& owner, CUstream stream, int ordinal, const Owner& keep) noexcept {
    DeviceBlock* block = block_of(owner);
    if (!block) return false;
    note_block_use(*block, stream, ordinal, keep);
    return true;
}

Allocation allocate_device(std::size_t bytes, int ordinal, CUstream stream) {
    Driver& d = driver();
    // The capture query and its refusals are capture.hpp's.
    const StreamRef on = StreamRef::from_handle(stream);
    const Capture capture = capture_of(on, ordinal);
    if (capture.capturing() && !capture.active())
        refuse_in_capture("allocating device memory", on, capture,
                          "the stream is in a capture stridex cannot join (invalidated, or the legacy stream)");
    if (capture.active()) return allocate_in_capture(d, bytes, ordinal, stream, capture);
    return allocate_from_pool(d, bytes, ordinal, stream);
}

namespace {
// Runs fn(block) for the block of GPU `ordinal`'s pool that holds `data`, under the pool's lock of
// its blocks (a release takes the block out under that lock before freeing it). False when none.
template <class Fn>
bool with_block_at(const void* data, int ordinal, Fn&& fn) noexcept {
    if (ordinal < 0 || !data) return false;
    Pools* all = nullptr;
    try {
        all = &pools_of(driver());
    } catch (...) {  // no driver, or no memory for its record: stridex has no pool
        return false;
    }
    if (static_cast<std::size_t>(ordinal) >= all->fast.size()) return false;
    DevicePool* pool = all->fast[static_cast<std::size_t>(ordinal)].load(std::memory_order_acquire);
    if (!pool) return false;  // no pool yet: nothing of it to find
    const auto at = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(data));
    const std::lock_guard lock(pool->blocks_mutex);
    auto it = pool->blocks.upper_bound(at);
    if (it == pool->blocks.begin()) return false;
    --it;
    DeviceBlock& b = *it->second;
    if (at >= b.ptr + b.bytes) return false;
    fn(b);
    return true;
}
}  // namespace

void note_use_at(const void* data, CUstream stream, int ordinal, const Owner& keep) noexcept {
    (void)with_block_at(data, ordinal, [&](DeviceBlock& b) { note_block_use(b, stream, ordinal, keep); });
}

bool in_pool(const void* data, int ordinal) noexcept {
    return with_block_at(data, ordinal, [](DeviceBlock&) {});
}

namespace detail {
bool owned_by_capture(const Owner& owner, unsigned long long capture) noexcept {
    void* c = owner.callback_context(&release_lease);
    return c && static_cast<Lease*>(c)->raw->capture == capture;
}
}  // namespace detail

std::optional<PoolMemory> pool_memory_of(const Owner& owner) noexcept {
    const DeviceBlock* b = block_of(owner);
    if (!b) return std::nullopt;
    const DevicePool* p = b->pool;
    return PoolMemory{b->ptr, b->bytes, b->ordinal, p->pool, p->shareable, p->not_shareable};
}

PoolStats device_pool_stats(int ordinal) {
    Driver& d = driver();
    (void)d.api();
    if (ordinal < 0 || ordinal >= d.device_count())
        fail(ErrorKind::value, "no CUDA device ", ordinal, ": this machine has ", d.device_count());
    PoolStats s;
    Pools& all = pools_of(d);
    const DevicePool* p = static_cast<std::size_t>(ordinal) < all.fast.size()
                              ? all.fast[static_cast<std::size_t>(ordinal)].load(std::memory_order_acquire)
                              : nullptr;
    if (!p) return s;
    s.created = true;
    s.in_use = p->in_use.load(std::memory_order_relaxed);
    s.peak_in_use = p->peak.load(std::memory_order_relaxed);
    s.allocations = p->live.load(std::memory_order_relaxed);
    s.reserved = pool_attribute(d, p->pool, cu::kMemPoolReservedMemCurrent);
    s.peak_reserved = pool_attribute(d, p->pool, cu::kMemPoolReservedMemHigh);
    s.shareable = p->shareable;
    s.not_shareable = p->not_shareable;
    return s;
}

void trim_device_pool(int ordinal) {
    Driver& d = driver();
    (void)d.api();
    if (ordinal < 0 || ordinal >= d.device_count())
        fail(ErrorKind::value, "no CUDA device ", ordinal, ": this machine has ", d.device_count());
    Pools& all = pools_of(d);
    if (static_cast<std::size_t>(ordinal) >= all.fast.size()) return;
    const DevicePool* p = all.fast[static_cast<std::size_t>(ordinal)].load(std::memory_order_acquire);
    if (!p) return;
    const ContextGuard guard(d, ordinal);
    d.call("cuMemPoolTrimTo", d.api().mem_pool_trim_to, p->pool, std::size_t{0});
}

}  // namespace stridex::cuda
