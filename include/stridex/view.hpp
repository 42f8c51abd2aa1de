// stridex::View: one strided array, anywhere — the only array type stridex has.
//
// A View is a data pointer plus byte offset, a Layout (shape and strides in elements), a Dtype, a
// Device, a read-only flag, the CUDA stream the data is ready on (and, for memory another process
// wrote, the event it is ready after: pending.hpp), and an Owner that keeps the memory alive.
// Copies are cheap (no allocation up to 8 dimensions) and share the owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "stridex/device.hpp"
#include "stridex/dtype.hpp"
#include "stridex/error.hpp"
#include "stridex/layout.hpp"
#include "stridex/owner.hpp"
#include "stridex/pending.hpp"

namespace stridex {

// Stream values use the DLPack/CUDA-array-interface encoding: 1 legacy default stream, 2
// per-thread default stream, anything else > 2 a CUstream handle; kNoStream means the data has no
// pending work (host memory, or already synchronized).
inline constexpr std::intptr_t kNoStream = -1;
// The legacy default stream: the default of every stream argument, as the array API's None.
// (The CUDA layer's StreamRef::kLegacy is this value.)
inline constexpr std::intptr_t kDefaultStream = 1;

namespace detail {
[[noreturn]] void fail_stream_value(std::intptr_t encoded, const char* what);
[[noreturn]] void fail_stream_handle(std::uintptr_t handle);
}  // namespace detail

// A stream value that is valid by construction: kNoStream, 1, 2 or a handle above 2. 0 is
// ambiguous (the legacy or the per-thread default stream?) and DLPack and the CUDA array interface
// forbid it; values below -1 mean nothing. Both are Error(value) here, the one place that checks,
// so a View never holds one and no exit checks its stream again.
class StreamValue {
public:
    constexpr StreamValue() noexcept = default;  // kNoStream: nothing pending
    // Error(value) for 0 and values below -1; `what` names the value in the message.
    constexpr explicit StreamValue(std::intptr_t encoded, const char* what = "stream") : encoded_(encoded) {
        if (encoded == 0 || encoded < kNoStream) [[unlikely]]
            detail::fail_stream_value(encoded, what);
    }
    // A driver handle (a CUstream or cudaStream_t, or what a stream object reports as one). NULL
    // is the driver's legacy default stream, so it becomes 1, never the forbidden 0: the one home
    // of that rule. 1 and 2 are the driver's own CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, so
    // any other handle is its own value. Error(value) for a handle no stream can have (>= 2**63).
    static constexpr StreamValue from_handle(std::uintptr_t handle) {
        if (handle > static_cast<std::uintptr_t>(INTPTR_MAX)) [[unlikely]]
            detail::fail_stream_handle(handle);
        return StreamValue(handle == 0 ? kDefaultStream : static_cast<std::intptr_t>(handle));
    }
    static StreamValue from_handle(const void* handle) { return from_handle(reinterpret_cast<std::uintptr_t>(handle)); }

    constexpr std::intptr_t encoded() const noexcept { return encoded_; }
    constexpr bool is_none() const noexcept { return encoded_ == kNoStream; }
    friend constexpr bool operator==(StreamValue, StreamValue) noexcept = default;

private:
    std::intptr_t encoded_ = kNoStream;
};

// Where a View's writability comes from: what its producer said, or could not say. Every export
// gives a consumer what the producer itself would have given it, never more (docs/export.md,
// "Writability").
enum class Writability : std::uint8_t {
    writable,   // the producer said writable (or the memory is stridex's own)
    readonly,   // the producer said read-only: no export may drop the flag (so no legacy capsule)
    unknown,    // the producer could not say (a legacy DLPack capsule): writable here, and DLPack
                // exports are legacy capsules again, so each consumer applies its own rule
    immutable,  // read-only by the producer's contract, which its own exports do not flag (JAX):
                // read-only here; legacy capsules go out unflagged, as the producer's own do
};

inline constexpr std::size_t kDynamicRank = static_cast<std::size_t>(-1);
template <class T, std::size_t Rank>
class TypedView;

class View {
public:
    View() = default;  // a 0-d view of nothing; size 1 but data NULL, so only useful as a placeholder
    // Validates the dtype, the pointer and every byte the layout reaches (see check_bytes).
    View(void* data, std::int64_t byte_offset, Layout layout, Dtype dtype, Device device, bool readonly, Owner owner,
         bool subbyte_padded = false);
    // The same with the writability's origin given (importers that know more than a bool): built
    // in place, where with_writability() would copy the View (and its Owner, two atomic updates).
    View(void* data, std::int64_t byte_offset, Layout layout, Dtype dtype, Device device, Writability writability,
         Owner owner, bool subbyte_padded = false);

    // A View whose invariants its caller established already, built without checking them again:
    // for the casters (caster_core.hpp), whose description the stridex wheel's own View constructor
    // validated (the caster API's import_array contract). Precondition: everything the constructor
    // checks holds, `layout` included; the caller checks what its stridex may know differently
    // (dtype, device).
    static View unchecked(void* data, Layout layout, Dtype dtype, Device device, Writability writability, Owner owner,
                          bool subbyte_padded) noexcept {
        return View(Unchecked{}, data, std::move(layout), dtype, device, writability, std::move(owner), subbyte_padded);
    }

    void* data() const noexcept { return data_; }
    std::int64_t byte_offset() const noexcept { return byte_offset_; }
    // Address of element 0 (data + byte_offset).
    // Integer arithmetic: a NULL data with an offset (an empty producer's tensor) is no pointer
    // arithmetic's business, and the constructor checked the sum stays in the address space.
    std::byte* ptr() const noexcept {
        return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(data_) +
                                            static_cast<std::uintptr_t>(byte_offset_));
    }

    const Layout& layout() const noexcept { return layout_; }
    int ndim() const noexcept { return layout_.ndim(); }
    std::span<const std::int64_t> shape() const noexcept { return layout_.shape(); }
    std::span<const std::int64_t> strides() const noexcept { return layout_.strides(); }
    std::int64_t size() const noexcept { return layout_.size(); }
    Dtype dtype() const noexcept { return dtype_; }
    Device device() const noexcept { return device_; }
    bool readonly() const noexcept {
        return writability_ == Writability::readonly || writability_ == Writability::immutable;
    }
    Writability writability() const noexcept { return writability_; }
    // The same view with its writability's origin replaced (importers that know more than a bool).
    View with_writability(Writability writability) const;
    const Owner& owner() const noexcept { return owner_; }
    // The keep-alive moved out of a View that is going away (the caster API hands it across a C
    // boundary without a copy, which would cost two atomic updates): the View keeps nothing alive
    // afterwards, so only its destruction may follow.
    Owner take_owner() && noexcept { return std::move(owner_); }
    // Replaces the keep-alive with one that keeps at least the same memory alive (it usually holds
    // the old one: the Python layer wraps a producer's owner to act when it is released).
    void set_owner(Owner owner) noexcept { owner_ = std::move(owner); }
    // The stream the data is ready on (kNoStream: nothing pending), in the encoding above.
    std::intptr_t stream() const noexcept { return stream_.encoded(); }
    // Replaces the stream and drops the Pending below: whoever says the data is ready on a stream
    // made that stream wait for all the View's pending work first (cuda::order(view, stream)).
    void set_stream(StreamValue stream) noexcept {
        stream_ = stream;
        pending_.reset();
    }
    // The same from an encoded int: Error(value) for 0 and values below -1 (StreamValue), and the
    // View keeps the stream (and Pending) it had.
    void set_stream(std::intptr_t encoded) { set_stream(StreamValue(encoded)); }
    // Work the data is ready only after besides its stream (an imported IPC View's event;
    // pending.hpp), or null. Shared by copies of the View and kept by derived views (index, slice,
    // reshape, ...): they all wait for the same work, and a stream waits for it once.
    const std::shared_ptr<const Pending>& pending() const noexcept { return pending_; }
    void set_pending(std::shared_ptr<const Pending> pending) noexcept { pending_ = std::move(pending); }

    // Sub-byte dtypes (int4, float4_e2m1fn, ...) are stored packed (two 4-bit values a byte) unless
    // the producer flagged them padded (one value a byte). Packed views are C-contiguous only: their
    // elements have no byte address, so strided access and reshaping slices are refused.
    bool subbyte_padded() const noexcept { return subbyte_padded_; }
    bool is_packed_subbyte() const noexcept { return dtype_.is_subbyte() && !subbyte_padded_; }

    // Bytes from element 0 to an element one step along each axis; itemsize-scaled strides.
    std::int64_t itemsize() const noexcept { return dtype_.itemsize(); }
    std::int64_t byte_stride(int axis) const { return layout_.stride(axis) * itemsize(); }
    // Bytes the elements occupy (size * itemsize, or packed storage for sub-byte dtypes).
    std::int64_t nbytes() const { return dtype_.storage_bytes(size(), subbyte_padded_); }
    // [lo, hi) byte range touched, relative to ptr(). Empty views touch nothing.
    Span byte_span() const;

    // Views of the same memory with another layout; owner, device, dtype, flags and stream carry over.
    View index(int axis, std::int64_t i) const;
    View slice(int axis, const Slice& s) const;
    View permute(std::span<const int> axes) const;
    View transpose() const;
    View squeeze() const;
    View squeeze(int axis) const;
    View expand(int axis) const;
    View reshape(std::span<const std::int64_t> shape) const;
    // Read-only from here on (an immutable view stays immutable: it is read-only already).
    View as_readonly() const;

    // Copies are the copy engine's (the CUDA layer): stridex::copy_to, contiguous and to_device in
    // include/stridex/cuda/copy.hpp; host copies are stridex::host_copy (include/stridex/host_copy.hpp).

    // Typed element access. T must match the dtype exactly (const T on read-only views); Rank is
    // checked when given. Elements may only be dereferenced where the memory is accessible: a
    // TypedView of CUDA memory is for handing to device code.
    template <class T, std::size_t Rank = kDynamicRank>
    TypedView<T, Rank> as() const;

private:
    struct Unchecked {};
    View(Unchecked, void* data, Layout&& layout, Dtype dtype, Device device, Writability writability, Owner&& owner,
         bool subbyte_padded) noexcept
        : data_(data),
          layout_(std::move(layout)),
          dtype_(dtype),
          device_(device),
          writability_(writability),
          subbyte_padded_(subbyte_padded && dtype.is_subbyte()),
          owner_(std::move(owner)) {}
    View with_layout(Layout layout, std::int64_t extra_elements) const;
    // Error(value) unless byte strides, byte span and storage fit in int64 and the span's
    // addresses do not wrap around the address space (docs/core.md).
    void check_bytes() const;
    // The common case of check_bytes() in one pass: true only when every rule holds (false for
    // packed sub-byte views, and for views near the int64 limits: check_bytes() decides those).
    bool bytes_fit() const noexcept;
    // data + byte_offset, and that plus span.lo and span.hi, all inside the address space.
    bool addresses_fit(Span span) const noexcept;
    void require_byte_addressable(const char* operation) const;

    void* data_ = nullptr;
    std::int64_t byte_offset_ = 0;
    Layout layout_;
    Dtype dtype_ = dtypes::float32;
    Device device_ = Device::cpu();
    StreamValue stream_;
    Writability writability_ = Writability::writable;
    bool subbyte_padded_ = false;
    Owner owner_;
    std::shared_ptr<const Pending> pending_;  // last: the hot paths never touch it
};

namespace detail {
[[noreturn]] void fail_typed_view(const View& view, Dtype wanted, std::size_t rank, bool wants_mutable);
[[noreturn]] void fail_index(std::int64_t index, int axis, std::int64_t extent);
}  // namespace detail

// Typed, strided element access over a View's memory. Keeps the View (and so the owner) alive.
template <class T, std::size_t Rank>
class TypedView {
public:
    explicit TypedView(View view) : view_(std::move(view)) {}

    T* data() const noexcept { return reinterpret_cast<T*>(view_.ptr()); }
    int ndim() const noexcept { return view_.ndim(); }
    std::int64_t extent(int axis) const noexcept { return view_.shape()[static_cast<std::size_t>(axis)]; }
    std::int64_t stride(int axis) const noexcept { return view_.strides()[static_cast<std::size_t>(axis)]; }
    const View& view() const noexcept { return view_; }

    // Element (i, j, ...). Bounds are checked unless NDEBUG is defined.
    template <class... Index>
    T& operator()(Index... indices) const {
        static_assert(Rank == kDynamicRank || sizeof...(Index) == Rank, "wrong number of indices");
        const std::int64_t idx[] = {static_cast<std::int64_t>(indices)..., 0};
#ifndef NDEBUG
        if (static_cast<int>(sizeof...(Index)) != ndim())
            fail(ErrorKind::index, "expected ", ndim(), " indices, found ", sizeof...(Index));
#endif
        std::int64_t offset = 0;
        for (std::size_t a = 0; a < sizeof...(Index); ++a) {
#ifndef NDEBUG
            if (idx[a] < 0 || idx[a] >= extent(static_cast<int>(a)))
                detail::fail_index(idx[a], static_cast<int>(a), extent(static_cast<int>(a)));
#endif
            offset += idx[a] * stride(static_cast<int>(a));
        }
        return data()[offset];
    }

private:
    View view_;
};

template <class T, std::size_t Rank>
TypedView<T, Rank> View::as() const {
    using Element = std::remove_const_t<T>;
    constexpr Dtype wanted = dtype_of<Element>();
    constexpr bool wants_mutable = !std::is_const_v<T>;
    if (dtype_ != wanted || (Rank != kDynamicRank && static_cast<std::size_t>(ndim()) != Rank) ||
        (wants_mutable && readonly()))
        detail::fail_typed_view(*this, wanted, Rank, wants_mutable);
    return TypedView<T, Rank>(*this);
}

}  // namespace stridex
