// VirtualBuffer: reserve once, map chunks behind each other, unmap from the end (vmm.hpp).
#include "stridex/cuda/vmm.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace stridex::cuda {

namespace {

constexpr std::size_t kDefaultChunksPerCapacity = 64;

std::size_t round_up(std::size_t value, std::size_t unit, const char* what) {
    if (value % unit == 0) return value;
    std::size_t out = 0;
    if (__builtin_add_overflow(value, unit - value % unit, &out))
        fail(ErrorKind::value, what, " of ", value, " bytes cannot be rounded up to a multiple of ", unit);
    return out;
}

// Runs f() and, when it returns, adds its duration to t.
template <class F>
void timed(CallTiming& t, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    const auto ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    ++t.calls;
    t.total_ns += ns;
    t.max_ns = std::max(t.max_ns, ns);
}

MemAllocationProp allocation_on(int device, bool shareable) {
    MemAllocationProp prop{};
    prop.type = cu::kMemAllocationTypePinned;
    // Export stays opt-in (VMM rule 3): only shareable buffers ask for POSIX fd handles.
    prop.requested_handle_types = shareable ? cu::kMemHandleTypePosixFileDescriptor : cu::kMemHandleTypeNone;
    prop.location = {cu::kMemLocationTypeDevice, device};
    return prop;
}

}  // namespace

// ---- State: everything a buffer owns; shared with its views' Owners ------------------------------

// Shareable buffers by base address, so a View of one can be exported by address alone (ipc.cpp).
namespace {
std::mutex& shareable_mutex() {
    static std::mutex m;
    return m;
}
std::map<CUdeviceptr, VirtualBuffer::State*>& shareable_buffers() {
    static std::map<CUdeviceptr, VirtualBuffer::State*> buffers;
    return buffers;
}
void register_shareable(VirtualBuffer::State* s);
void unregister_shareable(VirtualBuffer::State* s) noexcept;
}  // namespace

struct VirtualBuffer::State {
    struct Chunk {
        CUmemGenericAllocationHandle handle;
        int device;
    };

    Driver& d;
    std::vector<int> devices;
    bool shareable = false;
    std::size_t granularity = 0, chunk = 0, capacity = 0, size = 0;
    CUdeviceptr base = 0;
    std::vector<Chunk> chunks;  // chunks[i] mapped at base + i * chunk
    // Guards `chunks` against detail::shareable_chunks, which reads them from another thread (a
    // View being pickled while the buffer grows); the buffer's own thread needs it only to write.
    mutable std::mutex chunks_mutex;
    bool asleep = false;
    std::size_t asleep_chunks = 0;
    bool contents_lost = false;
    std::unique_ptr<std::byte[]> saved;  // host copy of [0, size) while asleep with keep_contents
    VirtualBufferStats stats;

    mutable std::mutex views_mutex;        // views are dropped from any thread
    std::multiset<std::size_t> view_ends;  // end offset of every live view

    explicit State(Driver& driver) : d(driver) {}
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() { teardown(); }

    CUdeviceptr address_of(std::size_t index) const { return base + index * chunk; }
    int device_of(std::size_t index) const { return devices[index % devices.size()]; }
    std::size_t chunks_for(std::size_t bytes) const { return bytes / chunk + (bytes % chunk != 0); }
    std::size_t largest_view_end() const {
        const std::lock_guard lock(views_mutex);
        return view_ends.empty() ? 0 : *view_ends.rbegin();
    }
    std::size_t view_count() const {
        const std::lock_guard lock(views_mutex);
        return view_ends.size();
    }

    void setup(std::size_t requested_capacity, const VirtualBufferOptions& options);
    void map_range(std::size_t first, std::size_t count, const char* operation);
    void unmap_last();
    void unmap_all(const char* operation);
    void synchronize();
    void copy_chunks(bool to_host);
    void teardown() noexcept;
};

void VirtualBuffer::State::setup(std::size_t requested_capacity, const VirtualBufferOptions& options) {
    const DriverTable& api = d.api();
    if (options.devices.empty()) fail(ErrorKind::value, "VirtualBuffer needs at least one device");
    for (std::size_t i = 0; i < options.devices.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            if (options.devices[i] == options.devices[j])
                fail(ErrorKind::value, "VirtualBuffer devices must be distinct, found ", options.devices[i], " twice");
    if (requested_capacity == 0) fail(ErrorKind::value, "VirtualBuffer capacity must be > 0");

    // VMM rule 1: some vGPUs do not support VMM; VMM rule 6: striping needs peer access both ways.
    for (const int ordinal : options.devices) {
        int supported = 0;
        d.call("cuDeviceGetAttribute", api.device_get_attribute, &supported,
               cu::kDeviceAttrVirtualMemoryManagementSupported, d.device(ordinal));
        if (!supported)
            fail(ErrorKind::cuda, "CUDA device ", ordinal,
                 " does not support virtual memory management "
                 "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)");
    }
    for (const int a : options.devices)
        for (const int b : options.devices) {
            if (a == b) continue;
            int can = 0;
            d.call("cuDeviceCanAccessPeer", api.device_can_access_peer, &can, d.device(a), d.device(b));
            if (!can)
                fail(
                    ErrorKind::cuda, "CUDA device ", a, " cannot access memory of device ", b,
                    " (cuDeviceCanAccessPeer is 0): a striped VirtualBuffer needs peer access between all its devices");
        }
    devices = options.devices;
    shareable = options.shareable;

    // VMM rule 2: sizes and addresses must be multiples of the minimum granularity; across devices, of
    // the largest one.
    for (const int ordinal : devices) {
        const MemAllocationProp prop = allocation_on(ordinal, shareable);
        std::size_t g = 0;
        d.call("cuMemGetAllocationGranularity", api.mem_get_allocation_granularity, &g, &prop,
               cu::kMemGranularityMinimum);
        granularity = std::max(granularity, g);
    }
    if (granularity == 0) fail(ErrorKind::cuda, "cuMemGetAllocationGranularity returned 0");
    const std::size_t wanted_chunk = options.chunk_size
                                         ? options.chunk_size
                                         : std::max(granularity, requested_capacity / kDefaultChunksPerCapacity);
    chunk = round_up(wanted_chunk, granularity, "chunk size");
    std::size_t stripe = 0;
    if (__builtin_mul_overflow(chunk, devices.size(), &stripe))
        fail(ErrorKind::value, "chunk size ", chunk, " times ", devices.size(), " devices overflows");
    capacity = round_up(requested_capacity, stripe, "capacity");

    // VMM rule 4: the address is only a hint; we pass none and take what the driver gives.
    CUdeviceptr reserved = 0;
    timed(stats.reserve,
          [&] { d.call("cuMemAddressReserve", api.mem_address_reserve, &reserved, capacity, 0, 0, 0ull); });
    base = reserved;  // set only on success: teardown frees the range iff base != 0
    if (shareable) register_shareable(this);
}

// Maps chunks [first, first + count) and grants every device access to them in one call (VMM rule 6).
// On failure, undoes exactly what it did, in reverse, and rethrows with the failing chunk named:
// `chunks` is appended only once everything succeeded.
void VirtualBuffer::State::map_range(std::size_t first, std::size_t count, const char* operation) {
    if (count == 0) return;
    const DriverTable& api = d.api();
    chunks.reserve(first + count);  // so the final append cannot throw
    std::vector<Chunk> fresh;
    fresh.reserve(count);
    std::size_t mapped = 0;
    std::string where;
    try {
        for (std::size_t k = 0; k < count; ++k) {
            const std::size_t i = first + k;
            const int dev = device_of(i);
            where = "chunk " + std::to_string(k + 1) + " of " + std::to_string(count) + " (index " + std::to_string(i) +
                    ", device " + std::to_string(dev) + ", " + std::to_string(chunk) + " bytes at base+" +
                    hex(i * chunk) + ")";
            const MemAllocationProp prop = allocation_on(dev, shareable);
            CUmemGenericAllocationHandle handle = 0;
            timed(stats.create, [&] { d.call("cuMemCreate", api.mem_create, &handle, chunk, &prop, 0ull); });
            fresh.push_back({handle, dev});
            // VMM rule 5: the offset into the allocation must be 0.
            timed(stats.map, [&] { d.call("cuMemMap", api.mem_map, address_of(i), chunk, 0, handle, 0ull); });
            ++mapped;
        }
        where = "access for " + std::to_string(devices.size()) + " device(s) to " + std::to_string(count) +
                " new chunk(s)";
        std::vector<MemAccessDesc> access;
        for (const int dev : devices) access.push_back({{cu::kMemLocationTypeDevice, dev}, cu::kMemAccessReadWrite});
        timed(stats.set_access, [&] {
            d.call("cuMemSetAccess", api.mem_set_access, address_of(first), count * chunk, access.data(),
                   access.size());
        });
    } catch (...) {
        for (std::size_t k = fresh.size(); k-- > 0;) {
            if (k < mapped) d.try_call(api.mem_unmap, address_of(first + k), chunk);
            d.try_call(api.mem_release, fresh[k].handle);
        }
        try {
            throw;
        } catch (const DriverError& e) {
            throw DriverError(std::string("VirtualBuffer.") + operation + " failed at " + where + ": " + e.message() +
                                  "; the buffer is unchanged",
                              e.code());
        }
    }
    {
        const std::lock_guard lock(chunks_mutex);
        chunks.insert(chunks.end(), fresh.begin(), fresh.end());
    }
    stats.bytes_mapped = chunks.size() * chunk;
    stats.peak_bytes_mapped = std::max(stats.peak_bytes_mapped, stats.bytes_mapped);
}

// Unmaps and releases the last chunk (VMM rule 10: unmap, then release). The caller synchronized first.
// If the unmap fails the chunk stays; once it succeeded the chunk is gone even if the release
// fails (its handle then leaks, and the error says so).
void VirtualBuffer::State::unmap_last() {
    const DriverTable& api = d.api();
    const std::size_t i = chunks.size() - 1;
    const Chunk c = chunks.back();
    timed(stats.unmap, [&] { d.call("cuMemUnmap", api.mem_unmap, address_of(i), chunk); });
    {
        const std::lock_guard lock(chunks_mutex);
        chunks.pop_back();
    }
    stats.bytes_mapped = chunks.size() * chunk;
    timed(stats.release, [&] { d.call("cuMemRelease", api.mem_release, c.handle); });
}

// Unmaps every chunk, last first. On failure `size` is clamped to what is still mapped, so the
// buffer stays consistent, and the error propagates.
void VirtualBuffer::State::unmap_all(const char* operation) {
    try {
        while (!chunks.empty()) unmap_last();
    } catch (const DriverError& e) {
        size = std::min(size, chunks.size() * chunk);
        throw DriverError(std::string("VirtualBuffer.") + operation + ": " + e.message() + "; " +
                              std::to_string(chunks.size()) + " chunk(s) remain mapped",
                          e.code());
    }
}

// VMM rule 8: cuMemUnmap is not stream-ordered, so pending kernels on any device of the buffer must be
// done before memory goes away. The primary context is where torch, CuPy and the runtime API work.
void VirtualBuffer::State::synchronize() {
    for (const int dev : devices) {
        const ContextGuard guard(d, dev);
        timed(stats.synchronize, [&] { d.call("cuCtxSynchronize", d.api().ctx_synchronize); });
    }
}

// One copy per chunk: each chunk is its own allocation, possibly on its own device.
void VirtualBuffer::State::copy_chunks(bool to_host) {
    const DriverTable& api = d.api();
    for (std::size_t i = 0; i < chunks.size() && i * chunk < size; ++i) {
        const std::size_t bytes = std::min(chunk, size - i * chunk);
        const ContextGuard guard(d, chunks[i].device);
        std::byte* host = saved.get() + i * chunk;
        timed(stats.copy, [&] {
            if (to_host)
                d.call("cuMemcpyDtoH", api.memcpy_dtoh, static_cast<void*>(host), address_of(i), bytes);
            else
                d.call("cuMemcpyHtoD", api.memcpy_htod, address_of(i), static_cast<const void*>(host), bytes);
        });
        stats.bytes_copied += bytes;
    }
}

// Synchronize, unmap, release, free the range (VMM rule 10), swallowing errors: this runs in
// destructors, possibly at interpreter exit after the driver has shut down (every call then
// answers CUDA_ERROR_DEINITIALIZED, and the driver has freed everything itself).
void VirtualBuffer::State::teardown() noexcept {
    if (shareable && base) unregister_shareable(this);
    if (!base || !d.usable()) return;
    const DriverTable& api = d.raw();
    try {
        const ContextGuard guard(d, devices.front());
        if (!chunks.empty()) {
            for (const int dev : devices) {
                const ContextGuard on(d, dev);
                if (d.try_call(api.ctx_synchronize) == result::deinitialized) return;
            }
            for (std::size_t i = chunks.size(); i-- > 0;) {
                d.try_call(api.mem_unmap, address_of(i), chunk);
                d.try_call(api.mem_release, chunks[i].handle);
            }
            const std::lock_guard lock(chunks_mutex);
            chunks.clear();
        }
        d.try_call(api.mem_address_free, base, capacity);
    } catch (...) {  // a context could not be made current: the driver is gone or broken
    }
    base = 0;
}

// ---- VirtualBuffer ------------------------------------------------------------------------------

VirtualBuffer::VirtualBuffer(std::size_t capacity, std::size_t size, VirtualBufferOptions options) {
    Driver& d = driver();
    (void)d.api();  // "CUDA driver ... not found" before anything else
    if (size > capacity) fail(ErrorKind::value, "VirtualBuffer size ", size, " exceeds its capacity ", capacity);
    auto state = std::make_shared<State>(d);
    {
        // The first device's primary context is current for every VMM call of the buffer.
        const ContextGuard guard(d, options.devices.empty() ? 0 : options.devices.front());
        state->setup(capacity, options);
    }
    state_ = std::move(state);
    grow(size);  // on failure state_ is destroyed with *this, freeing the reservation
}

VirtualBuffer::VirtualBuffer(VirtualBuffer&&) noexcept = default;
VirtualBuffer& VirtualBuffer::operator=(VirtualBuffer&&) noexcept = default;
VirtualBuffer::~VirtualBuffer() = default;

VirtualBuffer::State& VirtualBuffer::live() const {
    if (!state_) fail(ErrorKind::value, "VirtualBuffer is closed");
    return *state_;
}

namespace {
void require_awake(const VirtualBuffer::State& s, const char* operation) {
    if (s.asleep) fail(ErrorKind::value, "VirtualBuffer.", operation, ": the buffer is asleep; call wake() first");
}
}  // namespace

DevicePtr VirtualBuffer::base() const { return {live().base, Device::cuda(live().devices.front())}; }
std::size_t VirtualBuffer::size() const { return live().size; }
std::size_t VirtualBuffer::capacity() const { return live().capacity; }
std::size_t VirtualBuffer::chunk_size() const { return live().chunk; }
std::size_t VirtualBuffer::granularity() const { return live().granularity; }
std::size_t VirtualBuffer::num_chunks() const { return live().chunks.size(); }
std::size_t VirtualBuffer::mapped_bytes() const { return live().chunks.size() * live().chunk; }
const std::vector<int>& VirtualBuffer::devices() const { return live().devices; }
int VirtualBuffer::device_of_chunk(std::size_t index) const { return live().device_of(index); }
bool VirtualBuffer::sleeping() const { return live().asleep; }
bool VirtualBuffer::contents_lost() const { return live().contents_lost; }
std::size_t VirtualBuffer::live_views() const { return live().view_count(); }
VirtualBufferStats VirtualBuffer::stats() const { return live().stats; }

void VirtualBuffer::grow(std::size_t new_size) {
    State& s = live();
    require_awake(s, "grow");
    if (new_size > s.capacity)
        fail(ErrorKind::value, "VirtualBuffer.grow to ", new_size, " bytes exceeds the capacity of ", s.capacity);
    if (new_size < s.size)
        fail(ErrorKind::value, "VirtualBuffer.grow to ", new_size, " bytes is below the size ", s.size,
             "; use shrink() or resize()");
    const ContextGuard guard(s.d, s.devices.front());
    const std::size_t have = s.chunks.size();
    s.map_range(have, s.chunks_for(new_size) - have, "grow");
    s.size = new_size;
    ++s.stats.grows;
}

void VirtualBuffer::shrink(std::size_t new_size) {
    State& s = live();
    require_awake(s, "shrink");
    if (new_size > s.size)
        fail(ErrorKind::value, "VirtualBuffer.shrink to ", new_size, " bytes is above the size ", s.size,
             "; use grow() or resize()");
    if (const std::size_t end = s.largest_view_end(); end > new_size)
        fail(ErrorKind::buffer, "VirtualBuffer.shrink to ", new_size, " bytes: a live view reaches byte ", end,
             "; drop the views (and arrays made from them) first");
    const std::size_t target = s.chunks_for(new_size);
    if (target < s.chunks.size()) {
        const ContextGuard guard(s.d, s.devices.front());
        s.synchronize();
        try {
            while (s.chunks.size() > target) s.unmap_last();
        } catch (const DriverError& e) {
            s.size = std::min(s.size, s.chunks.size() * s.chunk);
            throw DriverError("VirtualBuffer.shrink: " + e.message(), e.code());
        }
    }
    s.size = new_size;
    ++s.stats.shrinks;
}

void VirtualBuffer::resize(std::size_t new_size) {
    if (new_size >= live().size)
        grow(new_size);
    else
        shrink(new_size);
}

void VirtualBuffer::sleep(bool keep_contents) {
    State& s = live();
    require_awake(s, "sleep");
    if (const std::size_t n = s.view_count(); n != 0)
        fail(ErrorKind::buffer, "VirtualBuffer.sleep: ", n, " live view(s) of the buffer; drop them first");
    const ContextGuard guard(s.d, s.devices.front());
    s.synchronize();
    if (keep_contents && s.size > 0) {
        s.saved = std::make_unique_for_overwrite<std::byte[]>(s.size);
        try {
            s.copy_chunks(/*to_host=*/true);
        } catch (...) {
            s.saved.reset();
            throw;
        }
    }
    const std::size_t n = s.chunks.size();
    try {
        s.unmap_all("sleep");
    } catch (...) {
        s.saved.reset();
        throw;
    }
    s.asleep = true;
    s.asleep_chunks = n;
    ++s.stats.sleeps;
}

void VirtualBuffer::wake() {
    State& s = live();
    if (!s.asleep) fail(ErrorKind::value, "VirtualBuffer.wake: the buffer is not asleep");
    const ContextGuard guard(s.d, s.devices.front());
    s.map_range(0, s.asleep_chunks, "wake");  // on failure: rolled back, still asleep
    const bool restore = static_cast<bool>(s.saved);
    if (restore) {
        try {
            s.copy_chunks(/*to_host=*/false);
            // A copy from pageable memory may return before its DMA finished: wait, so the
            // buffer has no pending work when wake() returns (views say stream -1).
            s.synchronize();
        } catch (...) {
            try {
                s.unmap_all("wake");  // back to asleep, host copy kept for the next try
            } catch (...) {
            }
            throw;
        }
    }
    s.saved.reset();
    s.asleep = false;
    s.asleep_chunks = 0;
    s.contents_lost = !restore && s.size > 0;
    ++s.stats.wakes;
}

void VirtualBuffer::close() {
    if (!state_) return;
    if (const std::size_t n = state_->view_count(); n != 0)
        fail(ErrorKind::buffer, "VirtualBuffer.close: ", n, " live view(s) of the buffer; drop them first");
    state_.reset();  // the only owner now: tears down here
}

View VirtualBuffer::view(Dtype dtype, std::span<const std::int64_t> shape, std::int64_t byte_offset) const {
    State& s = live();
    require_awake(s, "view");
    Layout layout = Layout::contiguous(shape);
    const std::int64_t nbytes = dtype.storage_bytes(layout.size());
    const auto size = static_cast<std::int64_t>(s.size);  // sizes fit: they were mapped
    if (byte_offset < 0 || byte_offset > size || nbytes > size - byte_offset)
        fail(ErrorKind::value, "VirtualBuffer.view of bytes [", byte_offset, ", ", byte_offset + nbytes,
             ") exceeds the buffer's size of ", size, " bytes");
    if (byte_offset % dtype.itemsize() != 0)
        fail(ErrorKind::value, "VirtualBuffer.view: byte offset ", byte_offset, " is not a multiple of the ",
             dtype.name(), " item size ", dtype.itemsize());

    std::multiset<std::size_t>::iterator entry;
    {
        const std::lock_guard lock(s.views_mutex);
        entry = s.view_ends.insert(static_cast<std::size_t>(byte_offset + nbytes));
    }
    Owner owner;
    try {
        owner = Owner::from_action([state = state_, entry]() noexcept {
            const std::lock_guard lock(state->views_mutex);
            state->view_ends.erase(entry);
        });
    } catch (...) {
        const std::lock_guard lock(s.views_mutex);
        s.view_ends.erase(entry);
        throw;
    }
    // Data points at the first element and byte_offset is 0: torch, Warp and older cuda.core
    // ignore DLPack's byte_offset (docs/protocols.md), so exports of this view must not rely on it.
    View v(reinterpret_cast<void*>(static_cast<std::uintptr_t>(s.base + static_cast<std::uint64_t>(byte_offset))), 0,
           std::move(layout), dtype, Device::cuda(s.devices.front()), /*readonly=*/false, std::move(owner));
    v.set_stream(kNoStream);
    return v;
}

// ---- Registry of shareable buffers (ipc.cpp exports their chunks) -------------------------------

namespace {
void register_shareable(VirtualBuffer::State* s) {
    const std::lock_guard lock(shareable_mutex());
    shareable_buffers()[s->base] = s;
}

void unregister_shareable(VirtualBuffer::State* s) noexcept {
    const std::lock_guard lock(shareable_mutex());
    shareable_buffers().erase(s->base);
}
}  // namespace

std::optional<detail::SharedChunks> detail::shareable_chunks(CUdeviceptr lo, CUdeviceptr hi) {
    const std::lock_guard lock(shareable_mutex());
    auto& buffers = shareable_buffers();
    auto it = buffers.upper_bound(lo);
    if (it == buffers.begin()) return std::nullopt;
    const VirtualBuffer::State& s = *std::prev(it)->second;
    if (lo >= s.base + s.capacity) return std::nullopt;
    const std::lock_guard chunks_lock(s.chunks_mutex);
    const std::size_t first = (lo - s.base) / s.chunk;
    const std::size_t end = (hi - s.base + s.chunk - 1) / s.chunk;  // one past the last covering chunk
    if (hi > s.base + s.capacity || end > s.chunks.size())
        fail(ErrorKind::value, "device bytes [", hex(lo), ", ", hex(hi),
             ") are not all mapped in their VirtualBuffer (", s.chunks.size(), " chunk(s) of ", s.chunk,
             " bytes mapped)");
    SharedChunks out{s.address_of(first), s.chunk, s.devices.front(), {}};
    for (std::size_t i = first; i < end; ++i) out.handles.push_back(s.chunks[i].handle);
    return out;
}

}  // namespace stridex::cuda
