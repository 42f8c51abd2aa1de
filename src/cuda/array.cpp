// stridex::Array factories (include/stridex/cuda/array.hpp).
#include "stridex/cuda/array.hpp"

#include <memory>
#include <utility>

#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/driver.hpp"
#include "stridex/cuda/from_pointer.hpp"
#include "stridex/cuda/memory.hpp"

namespace stridex {

namespace {

// Bytes of a C-contiguous array of `shape` (validated), at least 1 so that no allocation is NULL.
std::size_t allocation_bytes(const Layout& layout, Dtype dtype) {
    dtype.validate();
    return static_cast<std::size_t>(std::max<std::int64_t>(dtype.storage_bytes(layout.size()), 1));
}

}  // namespace

Array Array::host(std::span<const std::int64_t> shape, Dtype dtype) { return Array(allocate_host(shape, dtype)); }

Array Array::pinned(std::span<const std::int64_t> shape, Dtype dtype) {
    return allocate(shape, dtype, Device::cuda_host(), pool_allocator());
}

Array Array::cuda(std::span<const std::int64_t> shape, Dtype dtype, int ordinal, std::intptr_t stream) {
    cuda::Driver& d = cuda::driver();
    (void)d.api();  // Error(cuda) saying why when there is no usable driver
    if (ordinal < 0 || ordinal >= d.device_count())
        fail(ErrorKind::value, "no CUDA device ", ordinal, ": this machine has ", d.device_count());
    return allocate(shape, dtype, Device::cuda(ordinal), pool_allocator(), stream);
}

Array Array::allocate(std::span<const std::int64_t> shape, Dtype dtype, Device device, const Allocator& allocator,
                      std::intptr_t stream) {
    Layout layout = Layout::contiguous(shape);
    const std::size_t bytes = allocation_bytes(layout, dtype);
    Allocation a = allocator.allocate(bytes, device, stream);
    return Array(View(a.data, 0, std::move(layout), dtype, device, /*readonly=*/false, std::move(a.owner)));
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
