// stridex::View (view.hpp): the byte rules, derived views, and the checks behind typed element access.
#include "stridex/view.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "stridex/address.hpp"
#include "stridex/mdspan.hpp"

namespace stridex {

// The byte rules every View obeys (docs/core.md, "Bytes a view may address"): every stride in
// bytes, the byte span and the storage size fit in int64, and data + byte_offset + span stays
// inside the address space. Imported layouts come from foreign code, so nothing here may
// overflow while checking: each step is an overflow-checked builtin.
void View::check_bytes() const {
    // Every import runs this: the one-pass sufficient check answers for all but extreme views;
    // the exact checks below decide the rest (and packed sub-byte views) and name the broken rule.
    if (bytes_fit()) [[likely]]
        return;
    const std::int64_t item = itemsize();
    for (int a = 0; a < ndim(); ++a) {
        std::int64_t bytes = 0;
        if (__builtin_mul_overflow(layout_.strides()[static_cast<std::size_t>(a)], item, &bytes))
            fail(ErrorKind::value, "stride ", layout_.strides()[static_cast<std::size_t>(a)], " of axis ", a,
                 " times the item size ", item, " overflows int64");
    }
    std::int64_t storage = 0;
    if (!is_packed_subbyte() && __builtin_mul_overflow(size(), item, &storage))
        fail(ErrorKind::value, "a view of ", size(), " elements of ", item, " bytes overflows int64");
    const Span span = byte_span();  // Error(value) when it overflows
    if (!addresses_fit(span))
        fail(ErrorKind::value, "data ", hex(reinterpret_cast<std::uintptr_t>(data_)), " + byte_offset ", byte_offset_,
             " with bytes [", span.lo, ", ", span.hi, ") leaves the address space");
}

bool View::addresses_fit(Span span) const noexcept {
    // Element 0, then the lowest byte and one past the highest, each inside [0, 2**64). A span has
    // lo <= 0 <= hi, so its ends are magnitudes down and up from element 0; all three sums are
    // computed (`&`, not `&&`): no branch between them on the import path.
    std::uint64_t first = 0, low = 0, end = 0;
    bool fits = offset_address(reinterpret_cast<std::uintptr_t>(data_), byte_offset_, &first);
    fits &= offset_address(first, std::uint64_t{0} - static_cast<std::uint64_t>(span.lo), /*negative=*/true, &low);
    fits &= offset_address(first, static_cast<std::uint64_t>(span.hi), /*negative=*/false, &end);
    return fits;
}

bool View::bytes_fit() const noexcept {
    if (is_packed_subbyte()) return false;
    // Sufficient, not exact: every quantity check_bytes() multiplies by the item size (each
    // |stride|, the element count, -lo and hi + 1 of the element span) is at most `most`, so one
    // product decides them all. The Layout's invariants make the sums below exact (no overflow).
    const std::int64_t* shape = layout_.shape().data();
    const std::int64_t* strides = layout_.strides().data();
    std::int64_t size = 1, lo = 0, hi = 0;
    std::uint64_t most = 0;
    for (int a = 0; a < ndim(); ++a) {
        const std::int64_t e = shape[a], s = strides[a];
        const std::uint64_t magnitude = s < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(s) : std::uint64_t(s);
        most = magnitude > most ? magnitude : most;
        size *= e;
        const std::int64_t step = s * (e > 1 ? e - 1 : 0);
        lo += step < 0 ? step : 0;
        hi += step > 0 ? step : 0;
    }
    const auto low = std::uint64_t{0} - static_cast<std::uint64_t>(lo), high = static_cast<std::uint64_t>(hi) + 1;
    most = std::max({most, static_cast<std::uint64_t>(size), low, high});
    const auto item = static_cast<std::uint64_t>(itemsize());
    std::uint64_t product = 0;
    if (__builtin_mul_overflow(most, item, &product) || product > std::uint64_t{INT64_MAX}) return false;
    // The span in bytes (now known to fit) and the addresses, exactly as check_bytes() has them.
    return addresses_fit(size == 0 ? Span{} : Span{lo * itemsize(), (hi + 1) * itemsize()});
}

View::View(void* data, std::int64_t byte_offset, Layout layout, Dtype dtype, Device device, bool readonly, Owner owner,
           bool subbyte_padded)
    : View(data, byte_offset, std::move(layout), dtype, device,
           readonly ? Writability::readonly : Writability::writable, std::move(owner), subbyte_padded) {}

View::View(void* data, std::int64_t byte_offset, Layout layout, Dtype dtype, Device device, Writability writability,
           Owner owner, bool subbyte_padded)
    : data_(data),
      byte_offset_(byte_offset),
      layout_(std::move(layout)),
      dtype_(dtype),
      device_(device),
      writability_(writability),
      subbyte_padded_(subbyte_padded && dtype.is_subbyte()),
      owner_(std::move(owner)) {
    dtype_.validate();
    if (data_ == nullptr && !layout_.empty())
        fail(ErrorKind::value, "a view of ", layout_.size(), " elements needs a data pointer, found NULL");
    if (is_packed_subbyte() && !layout_.is_c_contiguous())
        fail(ErrorKind::unsupported, "packed ", dtype_.name(),
             " data must be C-contiguous: its elements have no byte addresses to stride over");
    check_bytes();
}

Span View::byte_span() const {
    if (!is_packed_subbyte()) return layout_.byte_span(itemsize());
    return layout_.empty() ? Span{} : Span{0, nbytes()};
}

void View::require_byte_addressable(const char* operation) const {
    if (is_packed_subbyte())
        fail(ErrorKind::unsupported, "cannot ", operation, " a view of packed ", dtype_.name(),
             ": its elements have no byte addresses");
}

View View::with_layout(Layout layout, std::int64_t extra_elements) const {
    View out = *this;
    out.layout_ = std::move(layout);
    // Cannot overflow: the element lies inside the layout's byte span, which fits in int64.
    out.byte_offset_ += extra_elements * itemsize();
    // Strides a derived layout invents (expand, reshape) must obey the same byte rules.
    out.check_bytes();
    return out;
}

View View::index(int axis, std::int64_t i) const {
    require_byte_addressable("index");
    auto [layout, offset] = layout_.index(axis, i);
    return with_layout(std::move(layout), offset);
}

View View::slice(int axis, const Slice& s) const {
    require_byte_addressable("slice");
    auto [layout, offset] = layout_.slice(axis, s);
    return with_layout(std::move(layout), offset);
}

View View::permute(std::span<const int> axes) const {
    require_byte_addressable("permute");
    return with_layout(layout_.permute(axes), 0);
}

View View::transpose() const {
    require_byte_addressable("transpose");
    return with_layout(layout_.transpose(), 0);
}

View View::squeeze() const { return with_layout(layout_.squeeze(), 0); }
View View::squeeze(int axis) const { return with_layout(layout_.squeeze(axis), 0); }
View View::expand(int axis) const { return with_layout(layout_.expand(axis), 0); }
// Squeeze, expand and reshape keep a C-contiguous layout C-contiguous, so packed views may use them.
View View::reshape(std::span<const std::int64_t> shape) const { return with_layout(layout_.reshape(shape), 0); }

View View::as_readonly() const {
    View out = *this;
    if (!readonly()) out.writability_ = Writability::readonly;
    return out;
}

View View::with_writability(Writability writability) const {
    View out = *this;
    out.writability_ = writability;
    return out;
}

namespace detail {

void fail_typed_view(const View& view, Dtype wanted, std::size_t rank, bool wants_mutable) {
    if (view.dtype() != wanted)
        fail(ErrorKind::type, "typed access as ", wanted.name(), " to a view of ", view.dtype().name());
    if (rank != kDynamicRank && static_cast<std::size_t>(view.ndim()) != rank)
        fail(ErrorKind::value, "typed access of rank ", rank, " to a view of rank ", view.ndim());
    if (wants_mutable && view.readonly())
        fail(ErrorKind::buffer, "mutable typed access to a read-only view; ask for a const element type");
    fail(ErrorKind::value, "typed access refused");
}

void fail_stream_value(std::intptr_t encoded, const char* what) {
    if (encoded == 0)
        fail(ErrorKind::value, what,
             " 0 is forbidden by DLPack and the CUDA array interface (ambiguous: the legacy "
             "or the per-thread default stream?); pass 1 for the legacy default stream, 2 for the per-thread "
             "default stream, -1 for none, or a stream handle");
    fail(ErrorKind::value, what, " must be -1 (none), 1, 2 or a stream handle, found ", encoded);
}

void fail_stream_handle(std::uintptr_t handle) {
    fail(ErrorKind::value, "stream handle ", hex(handle), " is no stream handle (above 2**63 - 1)");
}

void fail_index(std::int64_t index, int axis, std::int64_t extent) {
    fail(ErrorKind::index, "index ", index, " is out of bounds for axis ", axis, " with size ", extent);
}

void check_mdspan_strides(const View& view) {
    for (int a = 0; a < view.ndim(); ++a)
        if (view.strides()[static_cast<std::size_t>(a)] <= 0)
            fail(ErrorKind::unsupported, "mdspan layout_stride needs positive strides, found stride ",
                 view.strides()[static_cast<std::size_t>(a)], " on axis ", a);
}

}  // namespace detail
}  // namespace stridex
