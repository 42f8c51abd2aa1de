// stridex::cuda driver access: libcuda.so.1 loaded at run time, one table of the calls we use.
//
// stridex never includes cuda.h nor links libcuda: `import stridex` must work on a machine without
// a GPU. The few ABI types below are declared from the documented driver ABI (cuda.h of CUDA 12
// and 13, LP64) and pinned with static_asserts; names differ from cuda.h where cuda.h defines
// macros (cuMemGetAddressRange -> cuMemGetAddressRange_v2, CU_STREAM_LEGACY, ...), so a TU may
// include both. The opaque handle types are the very same incomplete structs cuda.h declares, so
// a CUstream from an extension author's code converts without casts.
//
// Loading happens once, on first use, thread-safely. Without a driver nothing fails at load or
// import; every CUDA feature then raises Error(cuda, "CUDA driver libcuda.so.1 not found: ...").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stridex/error.hpp"

// cuda.h's opaque handle structs, declared identically (global namespace) so the types interoperate.
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
struct CUmod_st;
struct CUfunc_st;
struct CUmemPoolHandle_st;
struct CUgraph_st;  // CUDA graphs (capture.hpp)
struct CUgraphNode_st;
struct CUuserObject_st;

namespace stridex::cuda {

// ---- ABI: scalar and handle types -------------------------------------------------------------
using CUresult = int;  // cudaError_enum: an int-sized C enum; 0 is success
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // exactly cuda.h's type (not uint64_t = unsigned long)
using CUmemGenericAllocationHandle = unsigned long long;
using CUcontext = ::CUctx_st*;
using CUstream = ::CUstream_st*;
using CUevent = ::CUevent_st*;
using CUmodule = ::CUmod_st*;
using CUfunction = ::CUfunc_st*;
using CUmemoryPool = ::CUmemPoolHandle_st*;
using CUgraph = ::CUgraph_st*;
using CUgraphNode = ::CUgraphNode_st*;
using CUuserObject = ::CUuserObject_st*;

static_assert(sizeof(CUdeviceptr) == 8 && sizeof(CUresult) == 4, "CUDA driver ABI is LP64");

// The CUresult values stridex acts on (names as cuda.h, minus the CUDA_ERROR_ prefix).
namespace result {
inline constexpr CUresult success = 0;
inline constexpr CUresult invalid_value = 1;
inline constexpr CUresult out_of_memory = 2;
inline constexpr CUresult not_initialized = 3;
inline constexpr CUresult deinitialized = 4;
inline constexpr CUresult no_device = 100;
inline constexpr CUresult invalid_device = 101;
inline constexpr CUresult invalid_context = 201;
inline constexpr CUresult invalid_handle = 400;
inline constexpr CUresult not_found = 500;
inline constexpr CUresult not_ready = 600;
inline constexpr CUresult peer_access_already_enabled = 704;
inline constexpr CUresult not_supported = 801;
}  // namespace result

// Enum values passed to the driver (cuda.h names in comments). Not "abi": <cxxabi.h> owns ::abi.
namespace cu {
inline constexpr int kDeviceAttrVirtualMemoryManagementSupported = 102;  // CU_DEVICE_ATTRIBUTE_...
inline constexpr int kPointerAttrMemoryType = 2;                         // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
inline constexpr int kPointerAttrIsManaged = 8;                          // CU_POINTER_ATTRIBUTE_IS_MANAGED
inline constexpr int kPointerAttrDeviceOrdinal = 9;                      // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
inline constexpr int kPointerAttrRangeStartAddr = 11;                    // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR
inline constexpr int kPointerAttrRangeSize = 12;                         // CU_POINTER_ATTRIBUTE_RANGE_SIZE
inline constexpr unsigned kMemoryTypeHost = 1;                           // CU_MEMORYTYPE_HOST (pinned/registered)
inline constexpr unsigned kMemoryTypeDevice = 2;                         // CU_MEMORYTYPE_DEVICE
inline constexpr unsigned kMemoryTypeUnified = 4;                        // CU_MEMORYTYPE_UNIFIED
inline constexpr int kMemAllocationTypePinned = 1;                       // CU_MEM_ALLOCATION_TYPE_PINNED
inline constexpr int kMemLocationTypeDevice = 1;                         // CU_MEM_LOCATION_TYPE_DEVICE
inline constexpr int kMemHandleTypeNone = 0;                             // CU_MEM_HANDLE_TYPE_NONE
inline constexpr int kMemAccessReadWrite = 3;                            // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
inline constexpr int kMemGranularityMinimum = 0;                         // CU_MEM_ALLOC_GRANULARITY_MINIMUM
inline constexpr unsigned kEventDisableTiming = 2;                       // CU_EVENT_DISABLE_TIMING
inline constexpr unsigned kStreamNonBlocking = 1;                        // CU_STREAM_NON_BLOCKING
// Interprocess sharing (ipc.hpp).
inline constexpr unsigned kEventInterprocess = 4;             // CU_EVENT_INTERPROCESS
inline constexpr unsigned kIpcMemLazyEnablePeerAccess = 1;    // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
inline constexpr int kMemHandleTypePosixFileDescriptor = 1;   // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
inline constexpr int kDeviceAttrMultiprocessorCount = 16;     // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
inline constexpr int kDeviceAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
inline constexpr int kDeviceAttrComputeCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
inline constexpr int kFuncAttrPtxVersion = 5;                 // CU_FUNC_ATTRIBUTE_PTX_VERSION
inline constexpr int kFuncAttrBinaryVersion = 6;              // CU_FUNC_ATTRIBUTE_BINARY_VERSION
inline constexpr unsigned kMemHostAllocPortable = 1;          // CU_MEMHOSTALLOC_PORTABLE
inline constexpr unsigned kMemAttachGlobal = 1;               // CU_MEM_ATTACH_GLOBAL
}  // namespace cu

// ---- ABI: structs (CUmemLocation, CUmemAllocationProp, CUmemAccessDesc) ------------------------
struct MemLocation {  // CUmemLocation
    int type;         // CUmemLocationType
    int id;
};
struct MemAllocationProp {       // CUmemAllocationProp
    int type;                    // CUmemAllocationType
    int requested_handle_types;  // CUmemAllocationHandleType; NONE: export stays opt-in (VMM rule 3)
    MemLocation location;
    void* win32_handle_meta_data;
    struct {
        unsigned char compression_type;
        unsigned char gpu_direct_rdma_capable;
        unsigned short usage;
        unsigned char reserved[4];
    } alloc_flags;
};
struct MemAccessDesc {  // CUmemAccessDesc
    MemLocation location;
    int flags;  // CUmemAccess_flags
};
static_assert(sizeof(MemLocation) == 8);
static_assert(sizeof(MemAllocationProp) == 32 && offsetof(MemAllocationProp, location) == 8 &&
              offsetof(MemAllocationProp, win32_handle_meta_data) == 16 &&
              offsetof(MemAllocationProp, alloc_flags) == 24);
static_assert(sizeof(MemAccessDesc) == 12 && offsetof(MemAccessDesc, flags) == 8);

// ---- ABI: interprocess handles (CUipcMemHandle, CUipcEventHandle, CUuuid), passed by value ------
struct IpcHandle {  // CUipcMemHandle and CUipcEventHandle: 64 opaque bytes each
    char reserved[64];
};
struct Uuid {  // CUuuid
    char bytes[16];
};
static_assert(sizeof(IpcHandle) == 64 && sizeof(Uuid) == 16);

// ---- ABI: CUDA_MEMCPY2D ---------------------------------------------------------------------------
// stridex passes every pointer as CU_MEMORYTYPE_UNIFIED in the *Device fields (all supported
// drivers use unified addressing), so the host/array fields stay null.
struct Memcpy2D {
    std::size_t src_x_in_bytes, src_y;
    unsigned src_memory_type;  // CUmemorytype
    const void* src_host;
    CUdeviceptr src_device;
    void* src_array;  // CUarray
    std::size_t src_pitch;
    std::size_t dst_x_in_bytes, dst_y;
    unsigned dst_memory_type;
    void* dst_host;
    CUdeviceptr dst_device;
    void* dst_array;
    std::size_t dst_pitch;
    std::size_t width_in_bytes, height;
};
static_assert(sizeof(Memcpy2D) == 128 && offsetof(Memcpy2D, src_pitch) == 48 &&
              offsetof(Memcpy2D, dst_x_in_bytes) == 56 && offsetof(Memcpy2D, width_in_bytes) == 112);

// ---- ABI: stream-ordered memory pools (CUmemPoolProps, CUmemPoolPtrExportData) --------------
// Memory pools (memory.hpp).
namespace cu {
inline constexpr int kMemPoolReuseFollowEventDependencies = 1;    // CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES
inline constexpr int kMemPoolReuseAllowOpportunistic = 2;         // CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC
inline constexpr int kMemPoolReuseAllowInternalDependencies = 3;  // CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES
inline constexpr int kMemPoolReleaseThreshold = 4;                // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (cuuint64_t)
inline constexpr int kMemPoolReservedMemCurrent = 5;              // CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
inline constexpr int kMemPoolReservedMemHigh = 6;                 // CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH
inline constexpr int kMemPoolUsedMemCurrent = 7;                  // CU_MEMPOOL_ATTR_USED_MEM_CURRENT
inline constexpr int kMemPoolUsedMemHigh = 8;                     // CU_MEMPOOL_ATTR_USED_MEM_HIGH
}  // namespace cu
struct MemPoolProps {      // CUmemPoolProps
    int alloc_type;        // CUmemAllocationType: kMemAllocationTypePinned
    int handle_types;      // CUmemAllocationHandleType: POSIX fd when the pool's memory may cross processes
    MemLocation location;  // the device
    void* win32_security_attributes;
    unsigned char reserved[64];  // later fields (maxSize, usage): zero is their default
};
struct MemPoolPtrExportData {  // CUmemPoolPtrExportData: 64 opaque bytes
    unsigned char reserved[64];
};
static_assert(sizeof(MemPoolProps) == 88 && offsetof(MemPoolProps, location) == 8 &&
              offsetof(MemPoolProps, win32_security_attributes) == 16);
static_assert(sizeof(MemPoolPtrExportData) == 64);

// ---- The table --------------------------------------------------------------------------------
// Every driver entry point stridex calls, grouped by subsystem: X(member, name, exported, (parameters)).
// `member` is the driver function minus the "cu" prefix, in snake case; `name` its base name for
// cuGetProcAddress; `exported` the symbol dlsym finds in drivers too old for it (the _v2 variant
// where there are two); every function returns CUresult. The table and its loader are both made
// from this one list, so an entry point cannot be declared and left unbound.
#define STRIDEX_DRIVER_FUNCTIONS(X) \
    /* ---- errors, initialization and devices ---- */ \
    X(get_error_name, "cuGetErrorName", "cuGetErrorName", (CUresult, const char**)) \
    X(get_error_string, "cuGetErrorString", "cuGetErrorString", (CUresult, const char**)) \
    X(init, "cuInit", "cuInit", (unsigned flags)) \
    X(driver_get_version, "cuDriverGetVersion", "cuDriverGetVersion", (int*)) \
    X(device_get_count, "cuDeviceGetCount", "cuDeviceGetCount", (int*)) \
    X(device_get, "cuDeviceGet", "cuDeviceGet", (CUdevice*, int ordinal)) \
    X(device_get_attribute, "cuDeviceGetAttribute", "cuDeviceGetAttribute", (int*, int attribute, CUdevice)) \
    X(device_can_access_peer, "cuDeviceCanAccessPeer", "cuDeviceCanAccessPeer", (int*, CUdevice, CUdevice peer)) \
    X(device_get_uuid, "cuDeviceGetUuid", "cuDeviceGetUuid_v2", (Uuid*, CUdevice)) \
    /* ---- contexts (each device's primary context) and peer access ---- */ \
    X(device_primary_ctx_retain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", (CUcontext*, CUdevice)) \
    X(device_primary_ctx_release, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", (CUdevice)) \
    X(ctx_get_current, "cuCtxGetCurrent", "cuCtxGetCurrent", (CUcontext*)) \
    X(ctx_set_current, "cuCtxSetCurrent", "cuCtxSetCurrent", (CUcontext)) \
    X(ctx_synchronize, "cuCtxSynchronize", "cuCtxSynchronize", ()) \
    X(ctx_get_device, "cuCtxGetDevice", "cuCtxGetDevice", (CUdevice*)) /* of the current context */ \
    X(ctx_enable_peer_access, "cuCtxEnablePeerAccess", "cuCtxEnablePeerAccess", (CUcontext peer, unsigned flags)) \
    /* ---- pointers and device memory (pointer.hpp) ---- */ \
    X(pointer_get_attributes, "cuPointerGetAttributes", "cuPointerGetAttributes", \
      (unsigned count, int* attributes, void** data, CUdeviceptr)) \
    X(mem_get_info, "cuMemGetInfo", "cuMemGetInfo_v2", (std::size_t * free, std::size_t * total)) \
    /* ---- streams and events (stream.hpp); queries are host queries, never waits ---- */ \
    X(stream_create, "cuStreamCreate", "cuStreamCreate", (CUstream*, unsigned flags)) \
    X(stream_destroy, "cuStreamDestroy", "cuStreamDestroy_v2", (CUstream)) \
    X(stream_synchronize, "cuStreamSynchronize", "cuStreamSynchronize", (CUstream)) \
    X(stream_wait_event, "cuStreamWaitEvent", "cuStreamWaitEvent", (CUstream, CUevent, unsigned flags)) \
    X(stream_query, "cuStreamQuery", "cuStreamQuery", (CUstream)) \
    X(event_create, "cuEventCreate", "cuEventCreate", (CUevent*, unsigned flags)) \
    X(event_record, "cuEventRecord", "cuEventRecord", (CUevent, CUstream)) \
    X(event_synchronize, "cuEventSynchronize", "cuEventSynchronize", (CUevent)) \
    X(event_query, "cuEventQuery", "cuEventQuery", (CUevent)) \
    X(event_destroy, "cuEventDestroy", "cuEventDestroy_v2", (CUevent)) \
    /* ---- CUDA graph capture (capture.hpp): capture state and mode, user objects ---- */ \
    X(thread_exchange_stream_capture_mode, "cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode", \
      (int* mode)) /* CUstreamCaptureMode, in and out */ \
    X(stream_get_capture_info, "cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2", \
      (CUstream, int* status, unsigned long long* id, CUgraph* graph, const CUgraphNode** dependencies, \
       std::size_t* count)) /* _v2 */ \
    X(user_object_create, "cuUserObjectCreate", "cuUserObjectCreate", \
      (CUuserObject*, void* ptr, void (*destroy)(void*), unsigned initial_refcount, unsigned flags)) \
    X(user_object_release, "cuUserObjectRelease", "cuUserObjectRelease", (CUuserObject, unsigned count)) \
    X(graph_retain_user_object, "cuGraphRetainUserObject", "cuGraphRetainUserObject", \
      (CUgraph, CUuserObject, unsigned count, unsigned flags)) \
    /* ---- allocations: device, pinned, managed, page-locked pageable (memory.hpp) ---- */ \
    X(mem_alloc, "cuMemAlloc", "cuMemAlloc_v2", (CUdeviceptr*, std::size_t bytes)) \
    X(mem_free, "cuMemFree", "cuMemFree_v2", (CUdeviceptr)) \
    X(mem_alloc_async, "cuMemAllocAsync", "cuMemAllocAsync", (CUdeviceptr*, std::size_t bytes, CUstream)) \
    X(mem_free_async, "cuMemFreeAsync", "cuMemFreeAsync", (CUdeviceptr, CUstream)) \
    X(mem_host_alloc, "cuMemHostAlloc", "cuMemHostAlloc", (void**, std::size_t bytes, unsigned flags)) \
    X(mem_free_host, "cuMemFreeHost", "cuMemFreeHost", (void*)) \
    X(mem_alloc_managed, "cuMemAllocManaged", "cuMemAllocManaged", (CUdeviceptr*, std::size_t bytes, unsigned flags)) \
    X(mem_host_register, "cuMemHostRegister", "cuMemHostRegister_v2", \
      (void*, std::size_t bytes, unsigned flags)) /* _v2 */ \
    X(mem_host_unregister, "cuMemHostUnregister", "cuMemHostUnregister", (void*)) \
    /* ---- stream-ordered memory pools (memory.hpp) ---- */ \
    X(mem_pool_create, "cuMemPoolCreate", "cuMemPoolCreate", (CUmemoryPool*, const MemPoolProps*)) \
    X(mem_pool_destroy, "cuMemPoolDestroy", "cuMemPoolDestroy", (CUmemoryPool)) \
    X(mem_pool_set_attribute, "cuMemPoolSetAttribute", "cuMemPoolSetAttribute", \
      (CUmemoryPool, int attribute, void* value)) \
    X(mem_pool_get_attribute, "cuMemPoolGetAttribute", "cuMemPoolGetAttribute", \
      (CUmemoryPool, int attribute, void* value)) \
    X(mem_pool_trim_to, "cuMemPoolTrimTo", "cuMemPoolTrimTo", (CUmemoryPool, std::size_t min_bytes_to_keep)) \
    X(mem_alloc_from_pool_async, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", \
      (CUdeviceptr*, std::size_t bytes, CUmemoryPool, CUstream)) \
    /* ---- virtual memory: reservations, chunks, mappings (vmm.hpp) ---- */ \
    X(mem_address_reserve, "cuMemAddressReserve", "cuMemAddressReserve", \
      (CUdeviceptr*, std::size_t size, std::size_t alignment, CUdeviceptr hint, unsigned long long flags)) \
    X(mem_address_free, "cuMemAddressFree", "cuMemAddressFree", (CUdeviceptr, std::size_t size)) \
    X(mem_create, "cuMemCreate", "cuMemCreate", \
      (CUmemGenericAllocationHandle*, std::size_t size, const MemAllocationProp*, unsigned long long flags)) \
    X(mem_release, "cuMemRelease", "cuMemRelease", (CUmemGenericAllocationHandle)) \
    X(mem_map, "cuMemMap", "cuMemMap", \
      (CUdeviceptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle, unsigned long long flags)) \
    X(mem_unmap, "cuMemUnmap", "cuMemUnmap", (CUdeviceptr, std::size_t size)) \
    X(mem_set_access, "cuMemSetAccess", "cuMemSetAccess", \
      (CUdeviceptr, std::size_t size, const MemAccessDesc*, std::size_t count)) \
    X(mem_get_allocation_granularity, "cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity", \
      (std::size_t*, const MemAllocationProp*, int option)) \
    /* ---- copies (copy.hpp) ---- */ \
    X(memcpy_dtoh, "cuMemcpyDtoH", "cuMemcpyDtoH_v2", (void* dst, CUdeviceptr src, std::size_t bytes)) \
    X(memcpy_htod, "cuMemcpyHtoD", "cuMemcpyHtoD_v2", (CUdeviceptr dst, const void* src, std::size_t bytes)) \
    X(memcpy_async, "cuMemcpyAsync", "cuMemcpyAsync", (CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream)) \
    X(memcpy_peer_async, "cuMemcpyPeerAsync", "cuMemcpyPeerAsync", \
      (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, std::size_t bytes, CUstream)) \
    X(memcpy_2d_async, "cuMemcpy2DAsync", "cuMemcpy2DAsync_v2", (const Memcpy2D*, CUstream)) \
    /* ---- the copy kernels (kernels.hpp): image, launches, occupancy, loaded code ---- */ \
    X(module_load_data, "cuModuleLoadData", "cuModuleLoadData", (CUmodule*, const void* image)) \
    X(module_get_function, "cuModuleGetFunction", "cuModuleGetFunction", (CUfunction*, CUmodule, const char* name)) \
    X(launch_kernel, "cuLaunchKernel", "cuLaunchKernel", \
      (CUfunction, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x, unsigned block_y, \
       unsigned block_z, unsigned shared_bytes, CUstream, void** params, void** extra)) \
    X(occupancy_max_active_blocks_per_multiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", \
      "cuOccupancyMaxActiveBlocksPerMultiprocessor", \
      (int* blocks, CUfunction, int block_size, std::size_t dynamic_shared_bytes)) \
    X(func_set_attribute, "cuFuncSetAttribute", "cuFuncSetAttribute", \
      (CUfunction, int attribute, int value)) /* tiles above 48 KiB of shared memory */ \
    X(func_get_attribute, "cuFuncGetAttribute", "cuFuncGetAttribute", (int* value, int attribute, CUfunction)) \
    /* ---- interprocess sharing (ipc.hpp): IPC handles and events, VMM and pool fds ---- */ \
    X(ipc_get_mem_handle, "cuIpcGetMemHandle", "cuIpcGetMemHandle", (IpcHandle*, CUdeviceptr)) \
    X(ipc_open_mem_handle, "cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", (CUdeviceptr*, IpcHandle, unsigned flags)) \
    X(ipc_close_mem_handle, "cuIpcCloseMemHandle", "cuIpcCloseMemHandle", (CUdeviceptr)) \
    X(ipc_get_event_handle, "cuIpcGetEventHandle", "cuIpcGetEventHandle", (IpcHandle*, CUevent)) \
    X(ipc_open_event_handle, "cuIpcOpenEventHandle", "cuIpcOpenEventHandle", (CUevent*, IpcHandle)) \
    X(mem_export_to_shareable_handle, "cuMemExportToShareableHandle", "cuMemExportToShareableHandle", \
      (void* shareable, CUmemGenericAllocationHandle, int handle_type, unsigned long long flags)) \
    X(mem_import_from_shareable_handle, "cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle", \
      (CUmemGenericAllocationHandle*, void* os_handle, int handle_type)) \
    X(mem_pool_export_to_shareable_handle, "cuMemPoolExportToShareableHandle", "cuMemPoolExportToShareableHandle", \
      (void* handle, CUmemoryPool, int handle_type, unsigned long long flags)) \
    X(mem_pool_import_from_shareable_handle, "cuMemPoolImportFromShareableHandle", \
      "cuMemPoolImportFromShareableHandle", (CUmemoryPool*, void* handle, int handle_type, unsigned long long flags)) \
    X(mem_pool_export_pointer, "cuMemPoolExportPointer", "cuMemPoolExportPointer", \
      (MemPoolPtrExportData*, CUdeviceptr)) \
    X(mem_pool_import_pointer, "cuMemPoolImportPointer", "cuMemPoolImportPointer", \
      (CUdeviceptr*, CUmemoryPool, MemPoolPtrExportData*))

// Every driver entry point stridex calls (STRIDEX_DRIVER_FUNCTIONS), resolved once. Each resolves to
// the variant of CUDA 12.0's ABI (the _v2 functions where there are two). A member is null when the
// driver lacks the function; calling through Driver::call reports that by name. Tests install a
// table of their own (DriverTable fields set one by one: DriverOverride).
struct DriverTable {
// A declarator and a parameter list: parentheses around either argument would not compile.
// NOLINTNEXTLINE(bugprone-macro-parentheses)
#define STRIDEX_DRIVER_MEMBER(member, name, exported, parameters) CUresult(*member) parameters = nullptr;
    STRIDEX_DRIVER_FUNCTIONS(STRIDEX_DRIVER_MEMBER)
#undef STRIDEX_DRIVER_MEMBER
};

// A failed driver call: Error(cuda) that also keeps the CUresult, for callers that branch on it.
class DriverError : public Error {
public:
    DriverError(std::string message, CUresult code) : Error(ErrorKind::cuda, std::move(message)), code_(code) {}
    CUresult code() const noexcept { return code_; }

private:
    CUresult code_;
};

// ---- The driver: a table plus the process-wide state that belongs to it ------------------------
// The process's libcuda Driver is created on first use and deliberately never destroyed (nor
// dlclosed): objects torn down at interpreter exit may still call it, and then get
// CUDA_ERROR_DEINITIALIZED instead of a jump into unmapped code.
class Driver {
public:
    // A usable driver: calls table.init(0) and caches the device count. If init fails the driver
    // is unusable and says why.
    explicit Driver(const DriverTable& table, std::string library = "libcuda.so.1");
    // An unusable driver (library missing or incomplete), with the reason every feature reports.
    static std::unique_ptr<Driver> unavailable(std::string reason);
    ~Driver();  // releases pooled events and retained contexts (only test drivers are destroyed)
    Driver(const Driver&) = delete;
    Driver& operator=(const Driver&) = delete;

    bool usable() const noexcept { return usable_; }
    const std::string& unavailable_reason() const noexcept { return reason_; }
    // The table; Error(cuda, reason) when the driver is unusable.
    const DriverTable& api() const {
        if (!usable_) fail_unusable();
        return table_;
    }
    // The table without the check, for noexcept teardown paths (pair it with try_call).
    const DriverTable& raw() const noexcept { return table_; }
    int device_count() const noexcept { return device_count_; }
    int version() const noexcept { return version_; }  // cuDriverGetVersion, e.g. 13000

    // Calls fn(args...) and throws DriverError "<name>: CUDA_ERROR_X (text)" unless it succeeds.
    template <class... Params, class... Args>
    void call(const char* name, CUresult (*fn)(Params...), Args&&... args) const {
        if (!fn) fail_missing(name);
        const CUresult r = fn(std::forward<Args>(args)...);
        if (r != result::success) fail_call(name, r);
    }
    // Error(cuda) naming `name` when the driver lacks it (for calls made without call()).
    template <class Fn>
    void require(const char* name, Fn* fn) const {
        if (!fn) fail_missing(name);
    }
    // The same for teardown paths, which must not throw: returns the CUresult.
    template <class... Params, class... Args>
    CUresult try_call(CUresult (*fn)(Params...), Args&&... args) const noexcept {
        if (!usable_ || !fn) return result::not_found;
        return fn(std::forward<Args>(args)...);
    }
    [[noreturn]] void fail_call(const char* name, CUresult r) const;
    // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", from cuGetErrorName and cuGetErrorString.
    std::string describe(CUresult r) const;

    // The CUdevice of an ordinal; Error(value) for an ordinal that does not exist.
    CUdevice device(int ordinal);
    // The device's primary context, retained once for the lifetime of this Driver (the context
    // torch, CuPy and the runtime API share). Thread-safe.
    CUcontext primary_context(int ordinal);

    // A small pool of CU_EVENT_DISABLE_TIMING events per device, for order(). The caller must
    // have the device's context current when acquiring (events are created in it).
    CUevent acquire_event(int ordinal);
    void release_event(int ordinal, CUevent event) noexcept;

private:
    Driver() = default;
    [[noreturn]] void fail_unusable() const;
    [[noreturn]] static void fail_missing(const char* name);
    void check_ordinal(int ordinal) const;

    DriverTable table_{};
    bool usable_ = false;
    std::string reason_;
    int device_count_ = 0;
    int version_ = 0;

    std::mutex mutex_;  // guards the per-device caches below
    std::vector<CUdevice> devices_;
    std::vector<CUcontext> contexts_;           // null until retained
    std::vector<std::vector<CUevent>> events_;  // free events per ordinal
};

// The active driver: the process's libcuda (loaded on first call), or the innermost DriverOverride.
Driver& driver();

// True when a driver is loaded, initialised and sees at least one device. Never throws.
bool cuda_available() noexcept;
// Devices the driver sees (honours CUDA_VISIBLE_DEVICES); 0 without a driver. Never throws.
int device_count() noexcept;

// Makes a device's primary context current for a scope, and restores the caller's context (or
// none) on exit. Switches only when needed: when the primary context is already current, the
// guard costs one cuCtxGetCurrent.
class ContextGuard {
public:
    explicit ContextGuard(int ordinal) : ContextGuard(driver(), ordinal) {}
    ContextGuard(Driver& driver, int ordinal);
    ~ContextGuard();
    ContextGuard(const ContextGuard&) = delete;
    ContextGuard& operator=(const ContextGuard&) = delete;

    CUcontext context() const noexcept { return context_; }

private:
    Driver& driver_;
    CUcontext context_ = nullptr;
    CUcontext previous_ = nullptr;
    bool switched_ = false;
};

namespace detail {
// Loads a driver library by name: dlopen, then resolution of every table entry through
// cuGetProcAddress_v2 (or cuGetProcAddress, or plain dlsym of versioned names on old drivers).
// Never throws: a missing library gives an unusable Driver whose reason quotes dlerror.
std::unique_ptr<Driver> load_driver(const char* library);
}  // namespace detail

// Test hook: while alive, driver() returns a Driver built from `table` (a test double), or loaded
// from another library name (to test the loader's error text). Overrides nest; they are meant for
// single-threaded tests, and objects created under one must be destroyed before it ends.
class DriverOverride {
public:
    explicit DriverOverride(const DriverTable& table);
    explicit DriverOverride(const char* library);
    ~DriverOverride();
    DriverOverride(const DriverOverride&) = delete;
    DriverOverride& operator=(const DriverOverride&) = delete;

    Driver& driver() noexcept { return *driver_; }

private:
    std::unique_ptr<Driver> driver_;
    Driver* previous_;
};

}  // namespace stridex::cuda
