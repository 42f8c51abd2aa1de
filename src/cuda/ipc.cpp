// CUDA interprocess sharing: exports (handles, fds, events) and the Views they import into (ipc.hpp).
#include "stridex/cuda/ipc.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

#include "ipc_event.hpp"
#include "stridex/cuda/capture.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/pointer.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/cuda/vmm.hpp"

namespace stridex::cuda::ipc {

namespace {

// The View's element bytes as absolute addresses [lo, hi); the view is not empty.
std::pair<std::uint64_t, std::uint64_t> address_span(const View& view) {
    const Span span = view.byte_span();
    const auto p = reinterpret_cast<std::uint64_t>(view.ptr());
    return {p + static_cast<std::uint64_t>(span.lo), p + static_cast<std::uint64_t>(span.hi)};
}

// Records an interprocess event on the View's stream, or on the legacy default stream when the
// View says none: a View of torch's or CuPy's default-stream output often claims no stream, and
// the legacy stream then still orders that work. Recording costs no host wait.
CUevent record_event(Driver& d, const View& view, IpcHandle& handle) {
    // Work still being captured runs only when its graph is launched: an event recorded now would
    // become a graph node, and the other process would wait for nothing (docs/graphs.md).
    if (view.stream() != kNoStream) {
        const StreamRef pending(view.stream());
        if (const Capture c = capture_of(pending, view.device().type == DeviceType::kCUDA ? view.device().id : 0);
            c.capturing())
            refuse_in_capture("sharing a View with another process", pending, c,
                              "its pending work is captured into a graph, which runs only when launched; share it "
                              "after the capture");
    }
    CUevent event = nullptr;
    d.call("cuEventCreate", d.api().event_create, &event, cu::kEventInterprocess | cu::kEventDisableTiming);
    try {
        // A re-exported IPC View: its stream waits for its own exporter's event first (ready_stream).
        const StreamRef ready = ready_stream(view);
        const StreamRef stream = ready.is_none() ? StreamRef::legacy() : ready;
        d.call("cuEventRecord", d.api().event_record, event, stream.handle());
        d.call("cuIpcGetEventHandle", d.api().ipc_get_event_handle, &handle, event);
    } catch (...) {
        d.try_call(d.raw().event_destroy, event);
        throw;
    }
    return event;
}

void close_fds(std::vector<int>& fds) noexcept {
    for (const int fd : fds) ::close(fd);
    fds.clear();
}

[[noreturn]] void fail_unshareable(const View& view, const std::string& why) {
    fail(ErrorKind::unsupported, "cannot share this ", view.device().name(), " View with another process: ", why);
}

// The checks every import makes before it maps anything: the layout lies in the shared bytes.
// Every sum is overflow-checked: the numbers come from a pickle, which anyone can write.
Layout checked_layout(const Shape& shape, std::uint64_t offset, std::uint64_t extent) {
    Layout layout(shape.shape, shape.strides);
    if (layout.empty()) fail(ErrorKind::value, "an IPC handle never describes an empty View");
    const Span span = layout.byte_span(shape.dtype.itemsize());
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (extent > kMax || offset > extent ||
        !span_within(span, static_cast<std::int64_t>(offset), static_cast<std::int64_t>(extent)))
        fail(ErrorKind::value, "IPC handle describes bytes [", span.lo, ", ", span.hi, ") around offset ", offset,
             " of a shared range of ", extent, " bytes");
    return layout;
}

// An Owner running both the mapping's release and the caller's `keep`.
template <class Release>
Owner owner_with(Release release, Owner keep) {
    return Owner::from_action([release = std::move(release), keep = std::move(keep)]() mutable noexcept {
        release();
        keep.reset();
    });
}

// An imported View is ready after the exporter's event, when it sent one: carried as its Pending
// (the opened event, or for VMM memory this process's relay of it) and waited for by each
// consumer's stream when it takes the View (ipc_event.hpp). No stream of this process has work
// for it: its stream is none.
View make_view(std::uint64_t data, Layout layout, const Shape& shape, int ordinal, std::shared_ptr<const Pending> event,
               Owner owner) {
    View v(reinterpret_cast<void*>(static_cast<std::uintptr_t>(data)), 0, std::move(layout), shape.dtype,
           Device::cuda(ordinal), shape.readonly, std::move(owner));
    v.set_stream(kNoStream);
    v.set_pending(std::move(event));
    return v;
}

// ---- Opened legacy handles: one cuIpcOpenMemHandle per (device, handle) and process ---------------
struct Opened {
    CUdeviceptr base = 0;
    std::size_t views = 0;
};
using OpenKey = std::pair<int, std::string>;  // ordinal, handle bytes

std::mutex& opened_mutex() {
    static std::mutex m;
    return m;
}
std::map<OpenKey, Opened>& opened() {
    static std::map<OpenKey, Opened> handles;
    return handles;
}

// The mapping of a handle, opened on first use; every call must be paired with release_handle.
CUdeviceptr acquire_handle(Driver& d, int ordinal, const IpcHandle& handle) {
    const std::lock_guard lock(opened_mutex());
    OpenKey key{ordinal, std::string(handle.reserved, sizeof handle.reserved)};
    auto it = opened().find(key);
    if (it == opened().end()) {
        CUdeviceptr base = 0;
        d.call("cuIpcOpenMemHandle", d.api().ipc_open_mem_handle, &base, handle, cu::kIpcMemLazyEnablePeerAccess);
        it = opened().emplace(std::move(key), Opened{base, 0}).first;
    }
    ++it->second.views;
    return it->second.base;
}

// Under the same mutex as acquire, so a handle is closed before anyone may open it again.
void release_handle(Driver& d, const OpenKey& key) noexcept {
    const std::lock_guard lock(opened_mutex());
    auto it = opened().find(key);
    if (it == opened().end() || --it->second.views != 0) return;
    try {
        const ContextGuard guard(d, key.first);
        d.try_call(d.raw().ipc_close_mem_handle, it->second.base);
    } catch (...) {  // the driver is gone (exit): it unmapped everything itself
    }
    opened().erase(it);
}

// ---- Imported pools: one cuMemPoolImportFromShareableHandle per (device, exporting pool) and
// process while it has imported allocations, one cuMemPoolImportPointer per allocation ---------------
using PoolKey = std::pair<int, std::string>;             // ordinal, the exporting pool's key
using PoolPointerKey = std::pair<PoolKey, std::string>;  // + the allocation's export data
struct ImportedPool {
    CUmemoryPool pool = nullptr;
    std::size_t pointers = 0;
};
struct ImportedPointer {
    CUdeviceptr ptr = 0;
    std::size_t views = 0;
};

std::map<PoolKey, ImportedPool>& imported_pools() {
    static std::map<PoolKey, ImportedPool> pools;
    return pools;
}
std::map<PoolPointerKey, ImportedPointer>& imported_pointers() {
    static std::map<PoolPointerKey, ImportedPointer> pointers;
    return pointers;
}

// Destroys an imported pool once none of its allocations is imported (under opened_mutex): a
// pool kept imported would keep the exporter's pool referenced after it has gone.
void drop_pool_if_unused(Driver& d, std::map<PoolKey, ImportedPool>::iterator it) noexcept {
    if (it->second.pointers != 0) return;
    (void)d.try_call(d.raw().mem_pool_destroy, it->second.pool);
    imported_pools().erase(it);
}

// The imported allocation, imported (with its pool) on first use; pair with release_pool_pointer.
CUdeviceptr acquire_pool_pointer(Driver& d, const PoolPointerKey& key, int fd, MemPoolPtrExportData data) {
    const std::lock_guard lock(opened_mutex());
    if (auto it = imported_pointers().find(key); it != imported_pointers().end()) {
        ++it->second.views;
        return it->second.ptr;
    }
    auto pool = imported_pools().find(key.first);
    if (pool == imported_pools().end()) {
        CUmemoryPool handle = nullptr;
        d.call("cuMemPoolImportFromShareableHandle", d.api().mem_pool_import_from_shareable_handle, &handle,
               reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)), cu::kMemHandleTypePosixFileDescriptor, 0ull);
        pool = imported_pools().emplace(key.first, ImportedPool{handle, 0}).first;
    }
    CUdeviceptr ptr = 0;
    if (const CUresult r = d.api().mem_pool_import_pointer(&ptr, pool->second.pool, &data); r != result::success) {
        drop_pool_if_unused(d, pool);
        d.fail_call("cuMemPoolImportPointer", r);
    }
    ++pool->second.pointers;
    imported_pointers().emplace(key, ImportedPointer{ptr, 1});
    return ptr;
}

// Under the same mutex as acquire. The driver requires an importer's free to have *completed*
// before the exporter frees, and the exporter may free (and reuse the memory) as soon as the
// release message that follows arrives: so the context is synchronized first (no work of this
// process still touches the memory, as VirtualBuffer's unmapping does) and the allocation freed
// with cuMemFree, not cuMemFreeAsync. This host wait is the price of the last View's release.
void release_pool_pointer(Driver& d, const PoolPointerKey& key) noexcept {
    const std::lock_guard lock(opened_mutex());
    auto it = imported_pointers().find(key);
    if (it == imported_pointers().end() || --it->second.views != 0) return;
    try {
        const ContextGuard guard(d, key.first.first);
        if (d.try_call(d.raw().ctx_synchronize) != result::deinitialized)
            (void)d.try_call(d.raw().mem_free, it->second.ptr);
        if (auto pool = imported_pools().find(key.first); pool != imported_pools().end()) {
            --pool->second.pointers;
            drop_pool_if_unused(d, pool);
        }
    } catch (...) {  // the driver is gone (exit): it released everything itself
    }
    imported_pointers().erase(it);
}

}  // namespace

// ---- Device UUIDs ---------------------------------------------------------------------------------

DeviceUuid device_uuid(int ordinal) {
    Driver& d = driver();
    Uuid raw{};
    d.call("cuDeviceGetUuid", d.api().device_get_uuid, &raw, d.device(ordinal));
    DeviceUuid out{};
    std::memcpy(out.data(), raw.bytes, out.size());
    return out;
}

int ordinal_of(const DeviceUuid& uuid) {
    Driver& d = driver();
    for (int i = 0; i < d.device_count(); ++i)
        if (device_uuid(i) == uuid) return i;
    fail(ErrorKind::value, "the exporting process's ", uuid_string(uuid), " is not visible in this process (",
         d.device_count(), " CUDA device(s); check CUDA_VISIBLE_DEVICES)");
}

std::string uuid_string(const DeviceUuid& uuid) {
    std::string out = "GPU-";
    char byte[3];
    for (std::size_t i = 0; i < uuid.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
        std::snprintf(byte, sizeof byte, "%02x", uuid[i]);
        out += byte;
    }
    return out;
}

// ---- Export ---------------------------------------------------------------------------------------

Export Export::of(const View& view) {
    if (view.device().type != DeviceType::kCUDA)
        fail_unshareable(view, "only CUDA device memory travels as a CUDA IPC handle");
    if (view.layout().empty()) fail_unshareable(view, "an empty View has no memory to share");
    Driver& d = driver();
    const int ordinal = view.device().id;
    const ContextGuard guard(d, ordinal);
    const auto [lo, hi] = address_span(view);
    const auto element0 = reinterpret_cast<std::uint64_t>(view.ptr());  // in [lo, hi): never below the base

    Export out;
    out.ordinal_ = ordinal;
    out.device_ = device_uuid(ordinal);
    if (auto chunks = detail::shareable_chunks(lo, hi)) {
        // VMM memory: one fd per chunk. The legacy handle would be refused for it.
        out.kind_ = MemoryKind::vmm_fds;
        out.chunk_size_ = chunks->chunk_size;
        out.offset_ = element0 - chunks->first;
        out.extent_ = chunks->handles.size() * chunks->chunk_size;
        try {
            for (const CUmemGenericAllocationHandle h : chunks->handles) {
                int fd = -1;
                d.call("cuMemExportToShareableHandle", d.api().mem_export_to_shareable_handle, static_cast<void*>(&fd),
                       h, cu::kMemHandleTypePosixFileDescriptor, 0ull);
                out.fds_.push_back(fd);
            }
        } catch (...) {
            close_fds(out.fds_);
            throw;
        }
    } else if (const std::optional<PoolMemory> pool = pool_memory_of(view.owner())) {
        if (!pool->shareable)
            fail_unshareable(view, "it is memory of stridex's pool for cuda:" + std::to_string(ordinal) +
                                       ", which cannot cross processes: " + std::string(pool->not_shareable) +
                                       "; copy it into memory that can (a torch or CuPy array, or a "
                                       "VirtualBuffer(shareable=True)) or allocate it with allocator='torch'");
        if (lo < pool->base || hi > pool->base + pool->bytes)
            fail_unshareable(view, "its bytes [" + hex(lo) + ", " + hex(hi) + ") lie outside its pool allocation");
        // The pool's fd plus the allocation's export data: the importer imports the pool, then
        // the allocation from it. A fd per export, closed with it (a duplicate of a cached one
        // would cost the same system call).
        out.kind_ = MemoryKind::pool_fd;
        out.offset_ = element0 - pool->base;
        out.extent_ = pool->bytes;
        out.pool_id_ = reinterpret_cast<std::uintptr_t>(pool->pool);
        // The pool first: the driver exports allocations only of a pool already shared.
        int fd = -1;
        d.call("cuMemPoolExportToShareableHandle", d.api().mem_pool_export_to_shareable_handle, static_cast<void*>(&fd),
               pool->pool, cu::kMemHandleTypePosixFileDescriptor, 0ull);
        out.fds_.push_back(fd);
        d.call("cuMemPoolExportPointer", d.api().mem_pool_export_pointer, &out.pool_pointer_, pool->base);
    } else {
        const PointerInfo info = pointer_info(lo);
        if (info.memory_type != MemoryType::device || info.base == 0)
            fail_unshareable(view, "the driver does not know " + hex(lo) + " as device memory (it is " +
                                       std::string(to_string(info.memory_type)) + ")");
        if (hi > info.base + info.size)
            fail_unshareable(view, "its bytes [" + hex(lo) + ", " + hex(hi) + ") span more than one allocation");
        d.require("cuIpcGetMemHandle", d.api().ipc_get_mem_handle);
        if (const CUresult r = d.raw().ipc_get_mem_handle(&out.handle_, info.base); r != result::success)
            fail_unshareable(view, "cuIpcGetMemHandle of its allocation at " + hex(info.base) + " failed with " +
                                       d.describe(r) +
                                       " (memory from a stream-ordered pool without IPC support, or cuMemCreate "
                                       "memory not made shareable, has no such handle)");
        out.kind_ = MemoryKind::ipc_handle;
        out.offset_ = element0 - info.base;
        out.extent_ = info.size;
    }
    try {
        IpcHandle event{};
        out.event_ = record_event(d, view, event);
        out.event_handle_ = event;
    } catch (...) {
        close_fds(out.fds_);
        throw;
    }
    return out;
}

Export::Export(Export&& o) noexcept
    : kind_(o.kind_),
      device_(o.device_),
      ordinal_(o.ordinal_),
      offset_(o.offset_),
      extent_(o.extent_),
      chunk_size_(o.chunk_size_),
      pool_id_(o.pool_id_),
      handle_(o.handle_),
      pool_pointer_(o.pool_pointer_),
      fds_(std::exchange(o.fds_, {})),
      event_(std::exchange(o.event_, nullptr)),
      event_handle_(o.event_handle_) {}

Export& Export::operator=(Export&& o) noexcept {
    if (this != &o) {
        this->~Export();
        new (this) Export(std::move(o));
    }
    return *this;
}

Export::~Export() {
    close_fds(fds_);
    if (!event_) return;
    try {
        Driver& d = driver();
        const ContextGuard guard(d, ordinal_);
        d.try_call(d.raw().event_destroy, event_);
    } catch (...) {  // driver gone at exit
    }
}

// ---- Import ---------------------------------------------------------------------------------------

View import_handle(const IpcHandle& handle, const DeviceUuid& device, std::uint64_t offset, std::uint64_t extent,
                   const Shape& shape, const std::optional<IpcHandle>& event, Owner keep) {
    Layout layout = checked_layout(shape, offset, extent);
    Driver& d = driver();
    const int ordinal = ordinal_of(device);
    const ContextGuard guard(d, ordinal);
    const CUdeviceptr base = acquire_handle(d, ordinal, handle);
    OpenKey key{ordinal, std::string(handle.reserved, sizeof handle.reserved)};
    Owner owner;
    std::shared_ptr<const Pending> opened_event;
    try {
        if (event) opened_event = open_event(d, *event, ordinal);
        owner = owner_with([&d, key]() noexcept { release_handle(d, key); }, std::move(keep));
    } catch (...) {
        release_handle(d, key);
        throw;
    }
    return make_view(base + offset, std::move(layout), shape, ordinal, std::move(opened_event), std::move(owner));
}

View import_fds(std::span<const int> fds, std::uint64_t chunk_size, const DeviceUuid& device, std::uint64_t offset,
                const Shape& shape, const std::optional<IpcHandle>& event, Owner keep) {
    if (fds.empty() || chunk_size == 0) fail(ErrorKind::value, "a VMM handle needs at least one chunk of > 0 bytes");
    std::size_t extent = 0;
    if (__builtin_mul_overflow(fds.size(), chunk_size, &extent))
        fail(ErrorKind::value, fds.size(), " chunks of ", chunk_size, " bytes overflow");
    Layout layout = checked_layout(shape, offset, extent);
    Driver& d = driver();
    const int ordinal = ordinal_of(device);
    const ContextGuard guard(d, ordinal);
    const DriverTable& api = d.api();

    // Reserve, then import and map each chunk; the mapping keeps the physical memory, so each
    // imported handle is released at once. On failure, undo in reverse.
    CUdeviceptr base = 0;
    d.call("cuMemAddressReserve", api.mem_address_reserve, &base, extent, 0, 0, 0ull);
    std::size_t mapped = 0;
    std::shared_ptr<const Pending> relayed;
    try {
        for (const int fd : fds) {
            CUmemGenericAllocationHandle h = 0;
            d.call("cuMemImportFromShareableHandle", api.mem_import_from_shareable_handle, &h,
                   reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)), cu::kMemHandleTypePosixFileDescriptor);
            const CUresult r = api.mem_map(base + mapped * chunk_size, chunk_size, 0, h, 0ull);
            d.try_call(api.mem_release, h);
            if (r != result::success) d.fail_call("cuMemMap", r);
            ++mapped;
        }
        const MemAccessDesc access{{cu::kMemLocationTypeDevice, ordinal}, cu::kMemAccessReadWrite};
        d.call("cuMemSetAccess", api.mem_set_access, base, extent, &access, std::size_t{1});
        if (event) relayed = relay_event(d, *event, ordinal);
    } catch (...) {
        for (std::size_t i = mapped; i-- > 0;) d.try_call(api.mem_unmap, base + i * chunk_size, chunk_size);
        d.try_call(api.mem_address_free, base, extent);
        throw;
    }
    // Unmapping is not stream-ordered: the context is synchronized first, as VirtualBuffer does.
    Owner owner = owner_with(
        [&d, base, extent, chunk_size, ordinal]() noexcept {
            try {
                const ContextGuard on(d, ordinal);
                if (d.try_call(d.raw().ctx_synchronize) == result::deinitialized) return;
                for (std::size_t off = extent; off > 0; off -= chunk_size)
                    d.try_call(d.raw().mem_unmap, base + off - chunk_size, chunk_size);
                d.try_call(d.raw().mem_address_free, base, extent);
            } catch (...) {  // driver gone at exit
            }
        },
        std::move(keep));
    return make_view(base + offset, std::move(layout), shape, ordinal, std::move(relayed), std::move(owner));
}

View import_pool(int fd, const std::string& pool_key, const MemPoolPtrExportData& pointer, const DeviceUuid& device,
                 std::uint64_t offset, std::uint64_t extent, const Shape& shape, const std::optional<IpcHandle>& event,
                 Owner keep) {
    Layout layout = checked_layout(shape, offset, extent);
    Driver& d = driver();
    const int ordinal = ordinal_of(device);
    const ContextGuard guard(d, ordinal);
    PoolPointerKey key{{ordinal, pool_key},
                       std::string(reinterpret_cast<const char*>(pointer.reserved), sizeof pointer.reserved)};
    const CUdeviceptr base = acquire_pool_pointer(d, key, fd, pointer);
    Owner owner;
    std::shared_ptr<const Pending> opened_event;
    try {
        // Carried, not waited for here: the exporter's event lives as long as its ticket, which
        // this View's release ends (as for a legacy handle; a VMM import relays it at import).
        if (event) opened_event = open_event(d, *event, ordinal);
        owner = owner_with([&d, key]() noexcept { release_pool_pointer(d, key); }, std::move(keep));
    } catch (...) {
        release_pool_pointer(d, key);
        throw;
    }
    return make_view(base + offset, std::move(layout), shape, ordinal, std::move(opened_event), std::move(owner));
}

std::size_t open_handles() {
    const std::lock_guard lock(opened_mutex());
    return opened().size();
}

std::size_t open_pools() {
    const std::lock_guard lock(opened_mutex());
    return imported_pools().size();
}

std::size_t open_pool_pointers() {
    const std::lock_guard lock(opened_mutex());
    return imported_pointers().size();
}

}  // namespace stridex::cuda::ipc
