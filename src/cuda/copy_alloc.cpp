// stridex::allocate for every device the copy engine writes to, and stream-ordered scratch.
#include <algorithm>
#include <numeric>
#include <vector>

#include "copy_internal.hpp"

namespace stridex {

namespace {

// A dense layout of `shape` in C or F order, or (K) with its axes laid out slowest-first as
// listed in `k_order`.
Layout dense_layout(std::span<const std::int64_t> shape, Order order, std::span<const int> k_order) {
    if (order == Order::C) return Layout::contiguous(shape);
    if (order == Order::F) return Layout::f_contiguous(shape);
    std::vector<std::int64_t> permuted;
    for (int a : k_order) permuted.push_back(shape[static_cast<std::size_t>(a)]);
    const Layout c = Layout::contiguous(permuted);
    std::vector<std::int64_t> strides(shape.size());
    for (std::size_t i = 0; i < k_order.size(); ++i) strides[static_cast<std::size_t>(k_order[i])] = c.strides()[i];
    return Layout(shape, strides);
}

View wrap(void* data, Layout layout, Dtype dtype, Device device, bool padded, Owner owner) {
    return View(data, 0, std::move(layout), dtype, device, /*readonly=*/false, std::move(owner), padded);
}

}  // namespace

View allocate(std::span<const std::int64_t> shape, Dtype dtype, Device device, Order order, bool subbyte_padded) {
    std::vector<int> identity(shape.size());
    std::iota(identity.begin(), identity.end(), 0);
    if (device == Device::cpu()) {
        View v = allocate_host(shape, dtype, subbyte_padded);
        if (order == Order::C) return v;
        return View(v.data(), 0, dense_layout(shape, order, identity), dtype, v.device(), /*readonly=*/false, v.owner(),
                    subbyte_padded);
    }
    dtype.validate();
    Layout layout = dense_layout(shape, order, identity);
    if (dtype.is_subbyte() && !subbyte_padded && !layout.is_c_contiguous())
        fail(ErrorKind::unsupported, "packed ", dtype.name(), " views are C-contiguous only; order ",
             static_cast<char>(order), " was asked");
    const auto bytes = static_cast<std::size_t>(
        std::max<std::int64_t>(dtype.storage_bytes(layout.size(), subbyte_padded), 1));
    cuda::Driver& d = cuda::driver();
    switch (device.type) {
        case DeviceType::kCUDA: {
            const int ordinal = device.id;
            const cuda::ContextGuard guard(d, ordinal);
            cuda::CUdeviceptr p = 0;
            d.call("cuMemAlloc", d.api().mem_alloc, &p, bytes);
            // cuMemFree waits for work still using the memory, so no stream needs to be tracked.
            Owner owner = Owner::from_action([p, ordinal]() noexcept {
                try {
                    cuda::Driver& drv = cuda::driver();
                    const cuda::ContextGuard g(drv, ordinal);
                    drv.try_call(drv.raw().mem_free, p);
                } catch (...) {  // the driver is gone (interpreter exit): nothing left to free
                }
            });
            return wrap(reinterpret_cast<void*>(p), std::move(layout), dtype, device, subbyte_padded, std::move(owner));
        }
        case DeviceType::kCUDAHost: {
            const cuda::ContextGuard guard(d, 0);
            void* p = nullptr;
            // Portable: pinned for every context, so any GPU's DMA engine reads it at full speed.
            d.call("cuMemHostAlloc", d.api().mem_host_alloc, &p, bytes, cuda::cu::kMemHostAllocPortable);
            Owner owner = Owner::from_action([p]() noexcept {
                try {
                    cuda::Driver& drv = cuda::driver();
                    drv.try_call(drv.raw().mem_free_host, p);
                } catch (...) {
                }
            });
            return wrap(p, std::move(layout), dtype, device, subbyte_padded, std::move(owner));
        }
        case DeviceType::kCUDAManaged: {
            const cuda::ContextGuard guard(d, 0);
            cuda::CUdeviceptr p = 0;
            d.call("cuMemAllocManaged", d.api().mem_alloc_managed, &p, bytes, cuda::cu::kMemAttachGlobal);
            Owner owner = Owner::from_action([p]() noexcept {
                try {
                    cuda::Driver& drv = cuda::driver();
                    const cuda::ContextGuard g(drv, 0);
                    drv.try_call(drv.raw().mem_free, p);
                } catch (...) {
                }
            });
            return wrap(reinterpret_cast<void*>(p), std::move(layout), dtype, device, subbyte_padded, std::move(owner));
        }
        default:
            fail(ErrorKind::unsupported, "stridex allocates on cpu, cuda:N, cuda_host and cuda_managed, not ",
                 device.name());
    }
}

namespace detail {
// The K order of a view: its axes by decreasing stride magnitude (stable, so ties keep C order).
std::vector<int> k_order(const View& v) {
    std::vector<int> axes(static_cast<std::size_t>(v.ndim()));
    std::iota(axes.begin(), axes.end(), 0);
    std::stable_sort(axes.begin(), axes.end(), [&](int a, int b) {
        const auto sa = v.strides()[static_cast<std::size_t>(a)], sb = v.strides()[static_cast<std::size_t>(b)];
        return (sa < 0 ? -sa : sa) > (sb < 0 ? -sb : sb);
    });
    return axes;
}

View allocate_like(const View& src, Device device, Order order) {
    if (order != Order::K) return allocate(src.shape(), src.dtype(), device, order, src.subbyte_padded());
    if (src.is_packed_subbyte()) return allocate(src.shape(), src.dtype(), device, Order::C, /*subbyte_padded=*/false);
    View out = allocate(src.shape(), src.dtype(), device, Order::C, src.subbyte_padded());
    return View(out.data(), 0, dense_layout(src.shape(), Order::K, k_order(src)), src.dtype(), device,
                /*readonly=*/false, out.owner(), src.subbyte_padded());
}
}  // namespace detail

}  // namespace stridex

namespace stridex::cuda::copy_engine {

Scratch::Scratch(std::int64_t bytes, int ordinal, CUstream stream) : ordinal_(ordinal), stream_(stream) {
    Driver& d = driver();
    // Stream-ordered: the memory is reused as soon as the queued work that reads it has run.
    d.call("cuMemAllocAsync", d.api().mem_alloc_async, &ptr_,
           static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)), stream);
}

Scratch::~Scratch() {
    try {
        Driver& d = driver();
        const ContextGuard guard(d, ordinal_);
        d.try_call(d.raw().mem_free_async, ptr_, stream_);
    } catch (...) {
    }
}

View scratch_view(const Scratch& scratch, const View& like, int ordinal) {
    return View(scratch.get(), 0, Layout::contiguous(like.shape()), like.dtype(), Device::cuda(ordinal),
                /*readonly=*/false, Owner{}, like.subbyte_padded());
}

}  // namespace stridex::cuda::copy_engine
