// Host strided copy: the two layouts are merged jointly (axes of extent 1 dropped, neighbours that
// are contiguous in both fused), then an odometer walks the outer axes and the inner axis is one
// memcpy when it is contiguous in both, a typed element loop otherwise.
#include "stridex/copy.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace stridex {
namespace {

constexpr std::size_t kAlignment = 64;

void free_aligned(void* p) noexcept { ::operator delete(p, std::align_val_t{kAlignment}); }

// One axis of a joint iteration: the extent and the byte strides of both sides.
struct Axis {
    std::int64_t extent, dst, src;
};

// Axes of extent 1 dropped, then neighbours fused where both sides are contiguous across them.
// Empty layouts never get here. At most kMaxNdim axes, so a fixed array suffices.
int merge_axes(const View& dst, const View& src, Axis* out) {
    const std::int64_t item = src.itemsize();
    int n = 0;
    for (int a = 0; a < src.ndim(); ++a) {
        const auto i = static_cast<std::size_t>(a);
        const std::int64_t e = src.shape()[i];
        if (e == 1) continue;
        const Axis axis{e, dst.strides()[i] * item, src.strides()[i] * item};
        if (n > 0) {
            Axis& prev = out[n - 1];
            if (prev.dst == e * axis.dst && prev.src == e * axis.src) {
                prev = Axis{prev.extent * e, axis.dst, axis.src};
                continue;
            }
        }
        out[n++] = axis;
    }
    return n;
}

template <class T>
void copy_elements(std::byte* d, const std::byte* s, std::int64_t n, std::int64_t ds, std::int64_t ss) noexcept {
    for (std::int64_t i = 0; i < n; ++i, d += ds, s += ss) {
        T value;
        std::memcpy(&value, s, sizeof(T));  // memcpy: strides need not keep T's alignment
        std::memcpy(d, &value, sizeof(T));
    }
}

void copy_row(std::byte* d, const std::byte* s, const Axis& inner, std::int64_t item) noexcept {
    if (inner.dst == item && inner.src == item) {
        std::memcpy(d, s, static_cast<std::size_t>(inner.extent * item));
        return;
    }
    switch (item) {
        case 1: return copy_elements<std::uint8_t>(d, s, inner.extent, inner.dst, inner.src);
        case 2: return copy_elements<std::uint16_t>(d, s, inner.extent, inner.dst, inner.src);
        case 4: return copy_elements<std::uint32_t>(d, s, inner.extent, inner.dst, inner.src);
        case 8: return copy_elements<std::uint64_t>(d, s, inner.extent, inner.dst, inner.src);
        default:
            for (std::int64_t i = 0; i < inner.extent; ++i)
                std::memcpy(d + i * inner.dst, s + i * inner.src, static_cast<std::size_t>(item));
    }
}

void strided_copy(const View& dst, const View& src) {
    if (src.layout().empty()) return;
    const std::int64_t item = src.itemsize();
    Axis axes[kMaxNdim];
    const int n = merge_axes(dst, src, axes);
    std::byte* const d0 = dst.ptr();
    const std::byte* const s0 = src.ptr();
    if (n == 0) {  // one element
        std::memcpy(d0, s0, static_cast<std::size_t>(item));
        return;
    }
    const Axis& inner = axes[n - 1];
    const int outer = n - 1;
    std::int64_t index[kMaxNdim] = {};
    std::byte* d = d0;
    const std::byte* s = s0;
    for (;;) {
        copy_row(d, s, inner, item);
        // Odometer over the outer axes, last fastest, moving both pointers incrementally.
        int a = outer - 1;
        for (; a >= 0; --a) {
            if (++index[a] < axes[a].extent) {
                d += axes[a].dst;
                s += axes[a].src;
                break;
            }
            index[a] = 0;
            d -= (axes[a].extent - 1) * axes[a].dst;
            s -= (axes[a].extent - 1) * axes[a].src;
        }
        if (a < 0) return;
    }
}

bool same_shape(const View& a, const View& b) noexcept {
    return std::ranges::equal(a.shape(), b.shape());
}

bool overlap(const View& a, const View& b) {
    if (a.layout().empty() || b.layout().empty()) return false;
    const Span sa = a.byte_span(), sb = b.byte_span();
    const auto lo_a = reinterpret_cast<std::uintptr_t>(a.ptr()) + static_cast<std::uintptr_t>(sa.lo);
    const auto hi_a = reinterpret_cast<std::uintptr_t>(a.ptr()) + static_cast<std::uintptr_t>(sa.hi);
    const auto lo_b = reinterpret_cast<std::uintptr_t>(b.ptr()) + static_cast<std::uintptr_t>(sb.lo);
    const auto hi_b = reinterpret_cast<std::uintptr_t>(b.ptr()) + static_cast<std::uintptr_t>(sb.hi);
    return lo_a < hi_b && lo_b < hi_a;
}

}  // namespace

View allocate_host(std::span<const std::int64_t> shape, Dtype dtype, bool subbyte_padded) {
    dtype.validate();
    Layout layout = Layout::contiguous(shape);  // validates the shape
    const std::int64_t bytes = dtype.storage_bytes(layout.size(), subbyte_padded);
    // Never NULL, even when empty: several consumers treat a NULL data pointer as an error.
    const auto size = static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1));
    void* data = ::operator new(size, std::align_val_t{kAlignment});
    Owner owner;
    try {
        owner = Owner::from_callback(&free_aligned, data);
    } catch (...) {
        free_aligned(data);
        throw;
    }
    return View(data, 0, std::move(layout), dtype, Device::cpu(), /*readonly=*/false, std::move(owner), subbyte_padded);
}

void copy_host(const View& dst, const View& src) {
    if (!src.device().host_accessible() || !dst.device().host_accessible())
        fail(ErrorKind::buffer, "host copy needs host-accessible memory on both sides, found ", src.device().name(),
             " -> ", dst.device().name());
    if (dst.readonly()) fail(ErrorKind::buffer, "cannot copy into a read-only view");
    if (src.dtype() != dst.dtype())
        fail(ErrorKind::value, "copy between different dtypes: ", src.dtype().name(), " -> ", dst.dtype().name());
    if (!same_shape(src, dst)) fail(ErrorKind::value, "copy between different shapes: ", src.layout(), " -> ", dst.layout());
    if (src.is_packed_subbyte() || dst.is_packed_subbyte()) {
        // Packed elements have no byte address; such views are C-contiguous (View's invariant), so
        // the storage is copied whole when both sides are packed alike.
        if (src.is_packed_subbyte() != dst.is_packed_subbyte())
            fail(ErrorKind::unsupported, "copy between packed and padded ", src.dtype().name(), " is not supported");
        if (src.nbytes() > 0) std::memmove(dst.ptr(), src.ptr(), static_cast<std::size_t>(src.nbytes()));
        return;
    }
    if (overlap(dst, src)) {
        const View tmp = host_copy(src);
        strided_copy(dst, tmp);
        return;
    }
    strided_copy(dst, src);
}

View host_copy(const View& src) {
    if (!src.device().host_accessible())
        fail(ErrorKind::buffer, "host copy of ", src.device().name(), " memory: the CPU cannot read it");
    View out = allocate_host(src.shape(), src.dtype(), src.subbyte_padded());
    if (src.is_packed_subbyte()) {
        if (src.nbytes() > 0) std::memcpy(out.ptr(), src.ptr(), static_cast<std::size_t>(src.nbytes()));
        return out;
    }
    strided_copy(out, src);
    return out;
}

}  // namespace stridex
