// Loading libcuda at run time and filling the DriverTable.
//
// Symbols are resolved through cuGetProcAddress with an explicit API version rather than dlsym:
// the exported names of several functions are versioned (cuMemGetAddressRange_v2,
// cuStreamDestroy_v2, ...) and cuda.h hides that with macros we do not have. Asking the driver for
// "cuMemcpyDtoH" as of CUDA 12.0 returns the variant with 12.0's ABI, whatever the driver's age.
#include <dlfcn.h>

#include <string>

#include "stridex/cuda/driver.hpp"

namespace stridex::cuda::detail {
namespace {

// The ABI every table entry is declared with (DriverTable). Newer drivers keep serving it.
constexpr int kRequestedApiVersion = 12000;
// CU_GET_PROC_ADDRESS_LEGACY_STREAM: the stream-taking functions with legacy default-stream
// semantics, whatever the process was compiled with; stridex passes explicit streams anyway.
constexpr unsigned long long kProcAddressLegacyStream = 1;

using GetProcAddressV2 = CUresult (*)(const char*, void**, int, unsigned long long, int* status);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, unsigned long long);

class Resolver {
public:
    explicit Resolver(void* library) : library_(library) {
        v2_ = reinterpret_cast<GetProcAddressV2>(dlsym(library, "cuGetProcAddress_v2"));  // CUDA 12.0+
        v1_ = reinterpret_cast<GetProcAddressV1>(dlsym(library, "cuGetProcAddress"));     // CUDA 11.3+
        if (auto get_version = reinterpret_cast<CUresult (*)(int*)>(dlsym(library, "cuDriverGetVersion"))) {
            int version = 0;
            // Never ask for a version newer than the driver: old drivers answer "not found".
            if (get_version(&version) == result::success && version > 0 && version < kRequestedApiVersion)
                version_ = version;
        }
    }

    // `name` is the base name ("cuMemcpyDtoH"); `exported` the symbol to dlsym when the driver is
    // too old for cuGetProcAddress ("cuMemcpyDtoH_v2").
    template <class Fn>
    void bind(Fn& slot, const char* name, const char* exported) const {
        slot = reinterpret_cast<Fn>(lookup(name, exported));
    }

private:
    void* lookup(const char* name, const char* exported) const {
        void* fn = nullptr;
        int status = 0;
        if (v2_ && v2_(name, &fn, version_, kProcAddressLegacyStream, &status) == result::success && fn) return fn;
        fn = nullptr;
        if (v1_ && v1_(name, &fn, version_, kProcAddressLegacyStream) == result::success && fn) return fn;
        return dlsym(library_, exported);
    }

    void* library_;
    GetProcAddressV2 v2_ = nullptr;
    GetProcAddressV1 v1_ = nullptr;
    int version_ = kRequestedApiVersion;
};

}  // namespace

std::unique_ptr<Driver> load_driver(const char* library) {
    dlerror();  // clear a stale message so the one we quote is ours
    // RTLD_LOCAL: the driver's symbols stay out of the global namespace of the process.
    void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        return Driver::unavailable(std::string("CUDA driver ") + library +
                                   " not found: " + (why ? why : "dlopen failed"));
    }
    // Never dlclosed: see Driver (teardown at exit may still call into it).
    const Resolver r(handle);
    DriverTable t{};
    r.bind(t.get_error_name, "cuGetErrorName", "cuGetErrorName");
    r.bind(t.get_error_string, "cuGetErrorString", "cuGetErrorString");
    r.bind(t.init, "cuInit", "cuInit");
    r.bind(t.driver_get_version, "cuDriverGetVersion", "cuDriverGetVersion");
    r.bind(t.device_get_count, "cuDeviceGetCount", "cuDeviceGetCount");
    r.bind(t.device_get, "cuDeviceGet", "cuDeviceGet");
    r.bind(t.device_get_attribute, "cuDeviceGetAttribute", "cuDeviceGetAttribute");
    r.bind(t.device_can_access_peer, "cuDeviceCanAccessPeer", "cuDeviceCanAccessPeer");
    r.bind(t.device_primary_ctx_retain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain");
    r.bind(t.device_primary_ctx_release, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2");
    r.bind(t.ctx_get_current, "cuCtxGetCurrent", "cuCtxGetCurrent");
    r.bind(t.ctx_set_current, "cuCtxSetCurrent", "cuCtxSetCurrent");
    r.bind(t.ctx_synchronize, "cuCtxSynchronize", "cuCtxSynchronize");
    r.bind(t.ctx_get_device, "cuCtxGetDevice", "cuCtxGetDevice");
    r.bind(t.pointer_get_attributes, "cuPointerGetAttributes", "cuPointerGetAttributes");
    r.bind(t.mem_get_info, "cuMemGetInfo", "cuMemGetInfo_v2");
    r.bind(t.stream_create, "cuStreamCreate", "cuStreamCreate");
    r.bind(t.stream_destroy, "cuStreamDestroy", "cuStreamDestroy_v2");
    r.bind(t.stream_synchronize, "cuStreamSynchronize", "cuStreamSynchronize");
    r.bind(t.stream_wait_event, "cuStreamWaitEvent", "cuStreamWaitEvent");
    r.bind(t.event_create, "cuEventCreate", "cuEventCreate");
    r.bind(t.event_record, "cuEventRecord", "cuEventRecord");
    r.bind(t.event_synchronize, "cuEventSynchronize", "cuEventSynchronize");
    r.bind(t.event_destroy, "cuEventDestroy", "cuEventDestroy_v2");
    r.bind(t.mem_address_reserve, "cuMemAddressReserve", "cuMemAddressReserve");
    r.bind(t.mem_address_free, "cuMemAddressFree", "cuMemAddressFree");
    r.bind(t.mem_create, "cuMemCreate", "cuMemCreate");
    r.bind(t.mem_release, "cuMemRelease", "cuMemRelease");
    r.bind(t.mem_map, "cuMemMap", "cuMemMap");
    r.bind(t.mem_unmap, "cuMemUnmap", "cuMemUnmap");
    r.bind(t.mem_set_access, "cuMemSetAccess", "cuMemSetAccess");
    r.bind(t.mem_get_allocation_granularity, "cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity");
    r.bind(t.memcpy_dtoh, "cuMemcpyDtoH", "cuMemcpyDtoH_v2");
    r.bind(t.memcpy_htod, "cuMemcpyHtoD", "cuMemcpyHtoD_v2");
    r.bind(t.device_get_uuid, "cuDeviceGetUuid", "cuDeviceGetUuid_v2");
    r.bind(t.ipc_get_mem_handle, "cuIpcGetMemHandle", "cuIpcGetMemHandle");
    r.bind(t.ipc_open_mem_handle, "cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2");
    r.bind(t.ipc_close_mem_handle, "cuIpcCloseMemHandle", "cuIpcCloseMemHandle");
    r.bind(t.ipc_get_event_handle, "cuIpcGetEventHandle", "cuIpcGetEventHandle");
    r.bind(t.ipc_open_event_handle, "cuIpcOpenEventHandle", "cuIpcOpenEventHandle");
    r.bind(t.mem_export_to_shareable_handle, "cuMemExportToShareableHandle", "cuMemExportToShareableHandle");
    r.bind(t.mem_import_from_shareable_handle, "cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle");
    r.bind(t.mem_alloc, "cuMemAlloc", "cuMemAlloc_v2");
    r.bind(t.mem_free, "cuMemFree", "cuMemFree_v2");
    r.bind(t.mem_host_alloc, "cuMemHostAlloc", "cuMemHostAlloc");
    r.bind(t.mem_free_host, "cuMemFreeHost", "cuMemFreeHost");
    r.bind(t.mem_alloc_async, "cuMemAllocAsync", "cuMemAllocAsync");
    r.bind(t.mem_free_async, "cuMemFreeAsync", "cuMemFreeAsync");
    r.bind(t.mem_alloc_managed, "cuMemAllocManaged", "cuMemAllocManaged");
    r.bind(t.memcpy_async, "cuMemcpyAsync", "cuMemcpyAsync");
    r.bind(t.memcpy_peer_async, "cuMemcpyPeerAsync", "cuMemcpyPeerAsync");
    r.bind(t.memcpy_2d_async, "cuMemcpy2DAsync", "cuMemcpy2DAsync_v2");
    r.bind(t.ctx_enable_peer_access, "cuCtxEnablePeerAccess", "cuCtxEnablePeerAccess");
    r.bind(t.module_load_data, "cuModuleLoadData", "cuModuleLoadData");
    r.bind(t.module_get_function, "cuModuleGetFunction", "cuModuleGetFunction");
    r.bind(t.launch_kernel, "cuLaunchKernel", "cuLaunchKernel");
    // Stream-ordered memory pools (memory.hpp, issue 25).
    r.bind(t.mem_pool_create, "cuMemPoolCreate", "cuMemPoolCreate");
    r.bind(t.mem_pool_destroy, "cuMemPoolDestroy", "cuMemPoolDestroy");
    r.bind(t.mem_pool_set_attribute, "cuMemPoolSetAttribute", "cuMemPoolSetAttribute");
    r.bind(t.mem_pool_get_attribute, "cuMemPoolGetAttribute", "cuMemPoolGetAttribute");
    r.bind(t.mem_pool_trim_to, "cuMemPoolTrimTo", "cuMemPoolTrimTo");
    r.bind(t.mem_alloc_from_pool_async, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync");
    r.bind(t.event_query, "cuEventQuery", "cuEventQuery");
    r.bind(t.mem_pool_export_to_shareable_handle, "cuMemPoolExportToShareableHandle",
           "cuMemPoolExportToShareableHandle");
    r.bind(t.mem_pool_import_from_shareable_handle, "cuMemPoolImportFromShareableHandle",
           "cuMemPoolImportFromShareableHandle");
    r.bind(t.mem_pool_export_pointer, "cuMemPoolExportPointer", "cuMemPoolExportPointer");
    r.bind(t.mem_pool_import_pointer, "cuMemPoolImportPointer", "cuMemPoolImportPointer");
    // The hand-over sanitizer (issue 27).
    r.bind(t.stream_query, "cuStreamQuery", "cuStreamQuery");
    r.bind(t.thread_exchange_stream_capture_mode, "cuThreadExchangeStreamCaptureMode",
           "cuThreadExchangeStreamCaptureMode");
    // CUDA graphs (issue 26, capture.hpp). cuStreamGetCaptureInfo as of 12.0 is the _v2 ABI (graph and
    // dependencies), which drivers of CUDA 13 still serve to callers asking for that version.
    r.bind(t.stream_get_capture_info, "cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2");
    r.bind(t.user_object_create, "cuUserObjectCreate", "cuUserObjectCreate");
    r.bind(t.user_object_release, "cuUserObjectRelease", "cuUserObjectRelease");
    r.bind(t.graph_retain_user_object, "cuGraphRetainUserObject", "cuGraphRetainUserObject");
    // The copy kernels' grids (issue 25).
    r.bind(t.occupancy_max_active_blocks_per_multiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
           "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    r.bind(t.func_set_attribute, "cuFuncSetAttribute", "cuFuncSetAttribute");
    r.bind(t.func_get_attribute, "cuFuncGetAttribute", "cuFuncGetAttribute");
    // Host copies at pinned speed (issue 25, host paths): the pageable pool's registered blocks.
    r.bind(t.mem_host_register, "cuMemHostRegister", "cuMemHostRegister_v2");
    r.bind(t.mem_host_unregister, "cuMemHostUnregister", "cuMemHostUnregister");
    if (!t.init)
        return Driver::unavailable(std::string("CUDA driver ") + library + " has no cuInit: not a CUDA driver");
    return std::make_unique<Driver>(t, library);
}

}  // namespace stridex::cuda::detail
