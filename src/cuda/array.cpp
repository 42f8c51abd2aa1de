// stridex::Array factories (include/stridex/cuda/array.hpp).
#include "stridex/cuda/array.hpp"

#include <memory>
#include <utility>

#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/from_pointer.hpp"

namespace stridex {

namespace {

// Bytes of a C-contiguous array of `shape` (validated), at least 1 so that no allocation is NULL.
std::size_t allocation_bytes(const Layout& layout, Dtype dtype) {
    dtype.validate();
    return static_cast<std::size_t>(std::max<std::int64_t>(dtype.storage_bytes(layout.size()), 1));
}

struct DeviceAllocation {
    cuda::CUdeviceptr ptr;
    int ordinal;
};

void free_device(void* p) noexcept {
    std::unique_ptr<DeviceAllocation> a(static_cast<DeviceAllocation*>(p));
    cuda::Driver& d = cuda::driver();
    // cuMemFree needs the allocation's context; at process exit the driver may be gone already,
    // and then there is nothing left to free.
    try {
        const cuda::ContextGuard guard(a->ordinal);
        (void)d.try_call(d.raw().mem_free, a->ptr);
    } catch (...) {
    }
}

void free_pinned(void* p) noexcept {
    cuda::Driver& d = cuda::driver();
    (void)d.try_call(d.raw().mem_free_host, p);
}

}  // namespace

Array Array::host(std::span<const std::int64_t> shape, Dtype dtype) { return Array(allocate_host(shape, dtype)); }

Array Array::pinned(std::span<const std::int64_t> shape, Dtype dtype) {
    Layout layout = Layout::contiguous(shape);
    const std::size_t bytes = allocation_bytes(layout, dtype);
    cuda::Driver& d = cuda::driver();
    (void)d.api();                      // Error(cuda) saying why when there is no usable driver
    const cuda::ContextGuard guard(0);  // pinned memory is portable; any context allocates it
    void* data = nullptr;
    constexpr unsigned kPortable = 0x01;  // CU_MEMHOSTALLOC_PORTABLE: pinned for every context
    d.call("cuMemHostAlloc", d.api().mem_host_alloc, &data, bytes, kPortable);
    Owner owner;
    try {
        owner = Owner::from_callback(&free_pinned, data);
    } catch (...) {
        free_pinned(data);
        throw;
    }
    return Array(View(data, 0, std::move(layout), dtype, Device::cuda_host(), /*readonly=*/false, std::move(owner)));
}

Array Array::cuda(std::span<const std::int64_t> shape, Dtype dtype, int ordinal) {
    Layout layout = Layout::contiguous(shape);
    const std::size_t bytes = allocation_bytes(layout, dtype);
    cuda::Driver& d = cuda::driver();
    (void)d.api();  // Error(cuda) saying why when there is no usable driver
    if (ordinal < 0 || ordinal >= d.device_count())
        fail(ErrorKind::value, "no CUDA device ", ordinal, ": this machine has ", d.device_count());
    const cuda::ContextGuard guard(ordinal);
    auto allocation = std::make_unique<DeviceAllocation>(DeviceAllocation{0, ordinal});
    d.call("cuMemAlloc", d.api().mem_alloc, &allocation->ptr, bytes);
    void* data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(allocation->ptr));
    Owner owner;
    try {
        owner = Owner::from_callback(&free_device, allocation.get());
    } catch (...) {
        free_device(allocation.release());
        throw;
    }
    (void)allocation.release();  // the owner frees it now
    return Array(View(data, 0, std::move(layout), dtype, Device::cuda(ordinal), /*readonly=*/false, std::move(owner)));
}

Array Array::adopt(void* data, Layout layout, Dtype dtype, void (*deleter)(void*) noexcept, void* context,
                   std::optional<Device> device) {
    Owner owner;
    try {
        owner = Owner::from_callback(deleter, context);
    } catch (...) {
        deleter(context);
        throw;
    }
    // On a failed check the owner (the only reference) runs the deleter as the exception leaves.
    return Array(cuda::view_of_pointer(data, std::move(layout), dtype, device, std::move(owner)));
}

}  // namespace stridex
