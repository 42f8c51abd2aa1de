// Sharing CUDA memory with another process on the same machine: the handles that travel, and
// the Views they open into. docs/distributed.md has the whole design; in short:
//
//   * Memory from any allocator (cudaMalloc, torch's and CuPy's caches, cuMemAlloc) travels as the
//     legacy IPC handle of the *allocation* holding it (cuIpcGetMemHandle of the range base that
//     cuPointerGetAttributes reports) plus the View's offset into it. The importer opens a handle
//     once per process and device and counts its Views; the last one closes it (a handle can be
//     opened only once per context: a second cuIpcOpenMemHandle fails).
//   * VMM memory (a VirtualBuffer made with shareable=true) travels as one POSIX file descriptor
//     per physical chunk (cuMemExportToShareableHandle); the importer maps the chunks, in order,
//     at a fresh reservation. The physical memory is then reference-counted by the driver, so it
//     outlives the exporting process.
//   * Memory of stridex's stream-ordered pools (memory.hpp) travels as the pool's POSIX fd
//     (cuMemPoolExportToShareableHandle) plus the allocation's 64-byte export data
//     (cuMemPoolExportPointer) and the View's offset. The importer imports the pool once per
//     process, exporting pool and device while it has Views of it, and each allocation once
//     (cuMemPoolImportPointer), counted like a legacy handle. The driver requires every importer
//     to have freed an allocation before its exporter frees it: the last View frees it with
//     cuMemFree, which has completed when the release reaches the exporter, whose ticket keeps the
//     allocation until then (docs/distributed.md, "Lifetime"); that last release synchronizes the
//     device's context first (a host wait, as a VMM import's unmapping).
//   * Pending work is ordered with an interprocess event (CU_EVENT_INTERPROCESS) recorded on the
//     View's stream (or the legacy default stream when it says none). A legacy handle's or pool
//     allocation's View carries the opened event as its Pending (stridex/pending.hpp), and each
//     consumer's stream waits for it when the consumer takes the View: nothing waits at import. A VMM
//     import's ticket, and so the exporter's event, is released right after it: a private stream
//     waits for the event at import and the View carries this process's relay event instead
//     (ipc_event.hpp). The host never blocks at import.
//   * Devices are named by UUID: CUDA_VISIBLE_DEVICES may number them differently in each process.
//
// The fds and the release protocol are the Python layer's (python/stridex/ipc/): a fd crosses a
// process only over a Unix socket.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stridex/cuda/driver.hpp"
#include "stridex/view.hpp"

namespace stridex::cuda::ipc {

using DeviceUuid = std::array<std::uint8_t, 16>;

DeviceUuid device_uuid(int ordinal);
// The ordinal of the GPU with this UUID in this process; Error(value) when it is not visible here.
int ordinal_of(const DeviceUuid& uuid);
// "GPU-1a2b3c4d-...", nvidia-smi's spelling.
std::string uuid_string(const DeviceUuid& uuid);

enum class MemoryKind : std::uint8_t { ipc_handle = 1, vmm_fds = 2, pool_fd = 3 };

// The layout a View needs to be rebuilt elsewhere (the exporter's pointer is meaningless there).
struct Shape {
    std::vector<std::int64_t> shape, strides;  // strides in elements
    Dtype dtype;
    bool readonly = false;
};

// What the exporter holds for one export until the importer released it: the IPC event it
// recorded (destroyed with this object) and, for VMM memory, the chunk fds (closed with it); for
// pool memory, the pool's fd (closed with it).
class Export {
public:
    // The export of `view`'s memory. Error(unsupported) naming why when it cannot be shared:
    // not CUDA device memory, memory the driver refuses to export (a cudaMallocAsync pool without
    // IPC support, cuMemCreate without a POSIX fd handle type, a stridex pool the driver would not
    // make shareable), or an empty view.
    static Export of(const View& view);
    Export(Export&&) noexcept;
    Export& operator=(Export&&) noexcept;
    ~Export();

    MemoryKind kind() const noexcept { return kind_; }
    const DeviceUuid& device() const noexcept { return device_; }
    // Bytes from the start of the shared range (ipc_handle and pool_fd: the allocation base;
    // vmm_fds: the first exported chunk) to the View's element 0. The imported View has byte_offset 0: torch
    // and others ignore DLPack's byte_offset, so the address itself must be right.
    std::uint64_t offset() const noexcept { return offset_; }
    std::uint64_t extent() const noexcept { return extent_; }          // bytes shared from the base
    const IpcHandle& handle() const noexcept { return handle_; }       // ipc_handle only
    const std::vector<int>& fds() const noexcept { return fds_; }      // vmm_fds; pool_fd: the pool's
    std::uint64_t chunk_size() const noexcept { return chunk_size_; }  // vmm_fds only
    // pool_fd only: the allocation's export data, and the exporting pool's identity in its
    // process (the importer's key, with the exporter's own, for the pool it imports once).
    const MemPoolPtrExportData& pool_pointer() const noexcept { return pool_pointer_; }
    std::uint64_t pool_id() const noexcept { return pool_id_; }
    // The event handle, when work was pending (the View said a stream, or the legacy one may have).
    const std::optional<IpcHandle>& event() const noexcept { return event_handle_; }

private:
    Export() = default;
    MemoryKind kind_ = MemoryKind::ipc_handle;
    DeviceUuid device_{};
    int ordinal_ = 0;
    std::uint64_t offset_ = 0, extent_ = 0, chunk_size_ = 0, pool_id_ = 0;
    IpcHandle handle_{};
    MemPoolPtrExportData pool_pointer_{};
    std::vector<int> fds_;
    CUevent event_ = nullptr;
    std::optional<IpcHandle> event_handle_;
};

// The View on the importing side. `offset` is Export::offset(); the layout must lie within the
// `extent` shared bytes (Error(value) otherwise: a malformed
// handle never becomes an out-of-bounds View). The View says stream -1; with an event, it carries
// the opened event as its Pending (View::pending), which no stream has waited for yet.
// `keep` is added to the View's owner (the Python layer's release message).
View import_handle(const IpcHandle& handle, const DeviceUuid& device, std::uint64_t offset, std::uint64_t extent,
                   const Shape& shape, const std::optional<IpcHandle>& event, Owner keep);
// The same for VMM chunks: fds in chunk order, each `chunk_size` bytes, mapped at a fresh
// reservation with read-write access for the device. The caller keeps (and closes) the fds and
// may release the exporter's event on return: with an event, the device's legacy default stream
// waits for it here and the View says stream 1 (no Pending); without, stream -1.
View import_fds(std::span<const int> fds, std::uint64_t chunk_size, const DeviceUuid& device, std::uint64_t offset,
                const Shape& shape, const std::optional<IpcHandle>& event, Owner keep);

// The same for pool memory: `fd` is the exporting pool's (the caller keeps and closes it; unused
// when this process has that pool imported already), `pool_key` names that pool uniquely among
// every exporter (the extension: the exporter's broker address and Export::pool_id()), and
// `pointer` is Export::pool_pointer(). Like import_handle, the View carries the opened event as
// its Pending: the exporter's ticket, and so its event, lives until this View's release.
View import_pool(int fd, const std::string& pool_key, const MemPoolPtrExportData& pointer, const DeviceUuid& device,
                 std::uint64_t offset, std::uint64_t extent, const Shape& shape, const std::optional<IpcHandle>& event,
                 Owner keep);

// Handles opened by import_handle and still in use in this process (for tests and the doctor).
std::size_t open_handles();
// Pools imported by import_pool and still in use in this process, and their allocations.
std::size_t open_pools();
std::size_t open_pool_pointers();

}  // namespace stridex::cuda::ipc
