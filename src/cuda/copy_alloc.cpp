// stridex::allocate for every device the copy engine writes to, and stream-ordered scratch.
#include <algorithm>
#include <numeric>
#include <vector>

#include "copy_internal.hpp"
#include "stridex/cuda/memory.hpp"
#include "stridex/cuda/stream.hpp"

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

View allocate(std::span<const std::int64_t> shape, Dtype dtype, Device device, Order order, bool subbyte_padded,
              std::intptr_t stream, const Allocator* allocator) {
    std::vector<int> identity(shape.size());
    std::iota(identity.begin(), identity.end(), 0);
    // Small cpu results: the core's aligned allocation (large ones: the pageable pool, below).
    if (device == Device::cpu() && allocator == nullptr &&
        dtype.storage_bytes(Layout::contiguous(shape).size(), subbyte_padded) < (std::int64_t{1} << 20)) {
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
    // Device memory comes from the pool of its GPU on the stream that will write it, pinned memory
    // from the pinned pool (memory.hpp), unless the caller names another allocator.
    Allocation a = (allocator ? *allocator : pool_allocator()).allocate(bytes, device, stream);
    return wrap(a.data, std::move(layout), dtype, device, subbyte_padded, std::move(a.owner));
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

View allocate_like(const View& src, Device device, Order order, std::intptr_t stream, const Allocator* allocator) {
    if (order != Order::K)
        return allocate(src.shape(), src.dtype(), device, order, src.subbyte_padded(), stream, allocator);
    if (src.is_packed_subbyte())
        return allocate(src.shape(), src.dtype(), device, Order::C, /*subbyte_padded=*/false, stream, allocator);
    View out = allocate(src.shape(), src.dtype(), device, Order::C, src.subbyte_padded(), stream, allocator);
    return View(out.data(), 0, dense_layout(src.shape(), Order::K, k_order(src)), src.dtype(), device,
                /*readonly=*/false, out.owner(), src.subbyte_padded());
}
}  // namespace detail

}  // namespace stridex

namespace stridex::cuda::copy_engine {

// From the device's pool, stream-ordered: the memory is reused as soon as the queued work that
// reads it has run (the owner frees it on `stream` when the Scratch goes).
Scratch::Scratch(std::int64_t bytes, int ordinal, CUstream stream)
    : memory_(allocate_device(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)), ordinal, stream)) {}

View scratch_view(const Scratch& scratch, const View& like, int ordinal) {
    return View(scratch.get(), 0, Layout::contiguous(like.shape()), like.dtype(), Device::cuda(ordinal),
                /*readonly=*/false, Owner{}, like.subbyte_padded());
}

}  // namespace stridex::cuda::copy_engine
