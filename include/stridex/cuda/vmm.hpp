// stridex::cuda::VirtualBuffer: device memory that grows and shrinks in place.
//
// A VirtualBuffer reserves a virtual address range (its capacity) once and backs a prefix of it
// with physical chunks (cuMemCreate), chunk i mapped at base + chunk_size * i (cuMemMap). Growing
// maps more chunks behind the last one, so the base never moves and no byte is ever copied;
// shrinking unmaps chunks from the end. The CUDA VMM rules it follows are the VMM rules of docs/protocols.md.
//
// Decisions (docs/cuda.md explains each):
//   * size is what the user asked for; the mapped bytes are size rounded up to whole chunks.
//   * chunk_size is rounded up to the largest minimum granularity of the devices; by default it
//     is capacity / 64 (at most 64 create+map calls fill the buffer), and never below that
//     granularity. capacity is rounded up to whole stripes (chunk_size * devices).
//   * Striping: chunk i lives on devices[i % n]; every device gets read-write access to all of it.
//   * Access is set once per grow, for the whole newly mapped range and all devices in one call.
//   * A grow that fails half-way unmaps and releases what it created, in reverse; the buffer is
//     as before and the error (DriverError) names the call, the chunk and the device.
//   * Unmapping is not stream-ordered: shrink, sleep and teardown first synchronize the primary
//     context of every device of the buffer (work queued in other contexts is not waited for).
//   * Views keep the buffer's memory alive and are tracked by byte range: shrinking below the end
//     of a live view, or sleeping while any view is alive, is Error(buffer) — never a dangling
//     pointer. Growing with live views is fine: the base does not move.
//   * sleep(keep_contents) releases all physical memory but keeps the address range; wake() maps
//     new memory at the same addresses. With keep_contents the bytes go to host memory and come
//     back; without, the contents after wake are undefined and contents_lost() says so.
//   * Not thread-safe: one thread at a time per buffer (like std::vector). Views may be dropped
//     from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "stridex/cuda/pointer.hpp"
#include "stridex/dtype.hpp"
#include "stridex/view.hpp"

namespace stridex::cuda {

struct VirtualBufferOptions {
    std::vector<int> devices{0};  // device ordinals; chunk i on devices[i % devices.size()]
    std::size_t chunk_size = 0;   // bytes; 0 picks capacity / 64. Rounded up to the granularity.
    // Chunks created exportable as POSIX file descriptors, so Views of the buffer can be shared
    // with other processes (ipc.hpp). Off by default: export is opt-in (VMM rule 3 in docs/protocols.md).
    bool shareable = false;
};

// Cost of one kind of driver call, over the buffer's life (successful calls only).
struct CallTiming {
    std::uint64_t calls = 0;
    std::uint64_t total_ns = 0;
    std::uint64_t max_ns = 0;
    double mean_us() const noexcept {
        return calls ? static_cast<double>(total_ns) / 1e3 / static_cast<double>(calls) : 0.0;
    }
};

struct VirtualBufferStats {
    std::size_t bytes_mapped = 0;       // physical bytes mapped now
    std::size_t peak_bytes_mapped = 0;  // the most ever mapped at once
    std::uint64_t bytes_copied = 0;     // only sleep(keep_contents=true) and the wake after it copy
    std::uint64_t grows = 0, shrinks = 0, sleeps = 0, wakes = 0;
    CallTiming reserve, create, map, set_access, synchronize, unmap, release, address_free, copy;
};

class VirtualBuffer {
public:
    // Reserves `capacity` bytes (rounded, see above) and maps enough chunks for `size`.
    explicit VirtualBuffer(std::size_t capacity, std::size_t size = 0, VirtualBufferOptions options = {});
    VirtualBuffer(VirtualBuffer&&) noexcept;
    VirtualBuffer& operator=(VirtualBuffer&&) noexcept;
    ~VirtualBuffer();  // teardown, unless views still hold the memory (then the last view does it)

    DevicePtr base() const;        // on cuda:devices()[0]
    std::size_t size() const;      // bytes in use, as asked for
    std::size_t capacity() const;  // bytes reserved
    std::size_t chunk_size() const;
    std::size_t granularity() const;   // the largest minimum granularity of the devices
    std::size_t num_chunks() const;    // chunks mapped now (0 while asleep)
    std::size_t mapped_bytes() const;  // num_chunks() * chunk_size()
    const std::vector<int>& devices() const;
    int device_of_chunk(std::size_t index) const;  // devices()[index % devices().size()]
    bool sleeping() const;
    bool contents_lost() const;  // the last wake() came after a sleep without keep_contents
    std::size_t live_views() const;
    bool closed() const noexcept { return !state_; }
    VirtualBufferStats stats() const;

    void grow(std::size_t new_size);    // Error(value) if new_size < size() or > capacity()
    void shrink(std::size_t new_size);  // Error(value) if new_size > size(); Error(buffer) over live views
    void resize(std::size_t new_size);  // grow or shrink
    void sleep(bool keep_contents = false);
    void wake();
    // Tears down now; Error(buffer) while views are alive. Every later call but closed() and
    // the destructor is Error(value).
    void close();

    // A C-contiguous view of bytes [byte_offset, byte_offset + nbytes) of the buffer, on
    // cuda:devices()[0], writable, with no pending stream work. Must lie within size(); the
    // offset must be a multiple of the item size. The View's Owner keeps the memory mapped.
    View view(Dtype dtype, std::span<const std::int64_t> shape, std::int64_t byte_offset = 0) const;

    struct State;  // internal (src/cuda/vmm.cpp)

private:
    State& live() const;
    std::shared_ptr<State> state_;
};

namespace detail {
// The chunks of a shareable VirtualBuffer that cover the device addresses [lo, hi), for ipc.cpp.
struct SharedChunks {
    CUdeviceptr first = 0;  // address of the first covering chunk
    std::size_t chunk_size = 0;
    int device = 0;  // the buffer's first device, where its views live
    std::vector<CUmemGenericAllocationHandle> handles;
};
// nullopt when no live shareable buffer holds `lo`; Error(value) when [lo, hi) is not mapped.
std::optional<SharedChunks> shareable_chunks(CUdeviceptr lo, CUdeviceptr hi);
}  // namespace detail

}  // namespace stridex::cuda
