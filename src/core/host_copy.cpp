// Host strided copy: the copy plan (stridex/detail/copy_plan.hpp) rewrites both layouts jointly,
// then an odometer walks the outer axes and the inner axis is one memcpy when it is contiguous in
// both, a typed unit loop otherwise.
#include "stridex/host_copy.hpp"

#include "stridex/detail/copy_plan.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace stridex {
namespace {

constexpr std::size_t kAlignment = 64;

void free_aligned(void* p) noexcept { ::operator delete (p, std::align_val_t{kAlignment}); }

struct Bytes16 {
    std::byte b[16];
};

template <class T>
void copy_elements(std::byte* d, const std::byte* s, std::int64_t n, std::int64_t ds, std::int64_t ss) noexcept {
    for (std::int64_t i = 0; i < n; ++i, d += ds, s += ss) {
        T value;
        std::memcpy(&value, s, sizeof(T));  // memcpy: strides need not keep T's alignment
        std::memcpy(d, &value, sizeof(T));
    }
}

void copy_row(std::byte* d, const std::byte* s, const detail::CopyAxis& inner, std::int64_t item) noexcept {
    if (inner.dst == item && inner.src == item) {
        std::memcpy(d, s, static_cast<std::size_t>(inner.extent * item));
        return;
    }
    switch (item) {
        case 1: return copy_elements<std::uint8_t>(d, s, inner.extent, inner.dst, inner.src);
        case 2: return copy_elements<std::uint16_t>(d, s, inner.extent, inner.dst, inner.src);
        case 4: return copy_elements<std::uint32_t>(d, s, inner.extent, inner.dst, inner.src);
        case 8: return copy_elements<std::uint64_t>(d, s, inner.extent, inner.dst, inner.src);
        case 16: return copy_elements<Bytes16>(d, s, inner.extent, inner.dst, inner.src);
        default:
            for (std::int64_t i = 0; i < inner.extent; ++i)
                std::memcpy(d + i * inner.dst, s + i * inner.src, static_cast<std::size_t>(item));
    }
}

void strided_copy(const View& dst, const View& src) {
    const detail::CopyPlan plan = detail::plan_copy(dst, src);
    if (plan.kind == detail::CopyPlan::Kind::nothing) return;
    std::byte* const d0 = dst.ptr() + plan.dst_offset;
    const std::byte* const s0 = src.ptr() + plan.src_offset;
    if (plan.kind == detail::CopyPlan::Kind::contiguous) {
        std::memcpy(d0, s0, static_cast<std::size_t>(plan.bytes));
        return;
    }
    const detail::CopyAxis* axes = plan.axes;
    const detail::CopyAxis& inner = axes[plan.ndim - 1];
    const int outer = plan.ndim - 1;
    std::int64_t index[kMaxNdim + 1] = {};
    std::byte* d = d0;
    const std::byte* s = s0;
    for (;;) {
        copy_row(d, s, inner, plan.unit);
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

bool same_shape(const View& a, const View& b) noexcept { return std::ranges::equal(a.shape(), b.shape()); }

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
    void* data = ::operator new (size, std::align_val_t{kAlignment});
    Owner owner;
    try {
        owner = Owner::from_callback(&free_aligned, data);
    } catch (...) {
        free_aligned(data);
        throw;
    }
    return View(data, 0, std::move(layout), dtype, Device::cpu(), /*readonly=*/false, std::move(owner), subbyte_padded);
}

void check_copy(const View& dst, const View& src) {
    if (src.dtype() != dst.dtype())
        fail(ErrorKind::value, "copy between different dtypes: dst is ", dst.dtype().name(), ", src is ",
             src.dtype().name(), " (stridex copies, it does not cast)");
    // dst first, as the caller wrote them (copy(dst, src)), in plain tuples.
    if (!same_shape(src, dst))
        fail(ErrorKind::value, "copy between different shapes: dst has ", plain_layout(dst.layout()), ", src has ",
             plain_layout(src.layout()));
    if (dst.readonly()) fail(ErrorKind::buffer, "cannot copy into a read-only view");
    if (dst.layout().may_overlap() && !dst.layout().empty())
        fail(ErrorKind::buffer,
             "copy destination dst addresses one element more than once (zero or overlapping strides: ",
             plain_layout(dst.layout()), "); copy into a view that has one place for every element");
    if (src.is_packed_subbyte() != dst.is_packed_subbyte() && src.size() > 0)
        fail(ErrorKind::unsupported, "copy between packed and padded ", src.dtype().name(), " is not supported");
    if (src.is_packed_subbyte() && !(src.layout().is_c_contiguous() && dst.layout().is_c_contiguous()))
        fail(ErrorKind::unsupported, "packed ", src.dtype().name(), " copies C-contiguous views only");
}

void copy_host(const View& dst, const View& src) {
    if (!src.device().host_accessible() || !dst.device().host_accessible())
        fail(ErrorKind::buffer, "host copy needs host-accessible memory on both sides, found ", src.device().name(),
             " -> ", dst.device().name());
    check_copy(dst, src);
    detail::copy_host_checked(dst, src);
}

void detail::copy_host_checked(const View& dst, const View& src) {
    if (src.is_packed_subbyte()) {
        // Packed elements have no byte address; such views are C-contiguous (View's invariant), so
        // the storage is copied whole (check_copy made sure both sides are packed alike).
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
