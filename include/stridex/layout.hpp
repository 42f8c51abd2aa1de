// stridex::Layout: the shape and strides of a strided array, both counted in ELEMENTS.
//
// A Layout knows nothing of dtypes or pointers; a View pairs it with both. Invariants, established
// by every public way of building one except `unchecked`:
//   * 0 <= ndim <= kMaxNdim, every extent >= 0;
//   * the product of the extents, counting 0 as 1, fits in int64 (so contiguous strides of the
//     shape are always computable, whatever the order of the axes);
//   * the element span, the sum of |stride| * (extent - 1) over axes of extent > 0, fits in int64,
//     even when another axis is 0 (so indexing and slicing never overflow).
// Strides of axes of extent <= 1 are never used to address memory and are not checked.
//
// Import of a tensor is a hot path, so shape and strides of up to kInlineNdim axes live inside the
// object: building, copying or moving such a Layout does not allocate. Larger ones use one heap
// block holding shape then strides.
#pragma once

#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <optional>
#include <span>
#include <utility>

#include "stridex/error.hpp"

namespace stridex {

inline constexpr int kMaxNdim = 64;

// A Python slice: a missing start/stop means "from the end the step walks away from".
struct Slice {
    std::optional<std::int64_t> start, stop;
    std::int64_t step = 1;
};

// The byte range [lo, hi) a layout touches, relative to the byte address of element 0.
struct Span {
    std::int64_t lo = 0, hi = 0;
    friend bool operator==(const Span&, const Span&) = default;
};

struct SlicedLayout;

class Layout {
public:
    // Axes stored inside the object; beyond this the storage moves to the heap.
    static constexpr int kInlineNdim = 8;

    // 0-d: one element, no axes. The storage is zeroed because copies copy it whole.
    Layout() noexcept : ndim_(0), storage_{} {}

    // C-order (resp. Fortran-order) strides; an extent of 0 counts as 1, as in NumPy.
    static Layout contiguous(std::span<const std::int64_t> shape);
    static Layout f_contiguous(std::span<const std::int64_t> shape);

    // Validates everything in the invariants above; Error(value) otherwise.
    Layout(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);
    // Strides given in BYTES (CUDA array interface, array interface, buffer protocol): each must
    // be a multiple of itemsize (> 0), else Error(unsupported), since stridex counts strides in
    // elements; then validated as above.
    static Layout from_byte_strides(std::span<const std::int64_t> shape, std::span<const std::int64_t> byte_strides,
                                    std::int64_t itemsize);
    // For callers that established the invariants already (e.g. derived from another Layout).
    // Precondition: shape.size() == strides.size() <= kMaxNdim and the invariants hold. Inline: the
    // XLA FFI handler (include/stridex/xla/ffi.hpp) builds one per buffer on every call.
    static Layout unchecked(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
        Layout out(int(shape.size()), Uninit{});
        std::int64_t* to_shape = out.shape_mut();
        std::int64_t* to_strides = out.strides_mut();
        for (std::size_t i = 0; i < shape.size(); ++i) to_shape[i] = shape[i];
        for (std::size_t i = 0; i < strides.size(); ++i) to_strides[i] = strides[i];
        return out;
    }

    Layout(const Layout& other) : ndim_(other.ndim_) {
        if (other.on_heap())
            storage_.heap = clone_heap(other);
        else
            storage_ = other.storage_;  // a fixed-size copy: cheaper than copying ndim entries
    }
    Layout(Layout&& other) noexcept : ndim_(std::exchange(other.ndim_, 0)), storage_(other.storage_) {}
    Layout& operator=(const Layout& other) {
        if (this == &other) return *this;
        // Clone before releasing, so a failed allocation leaves *this untouched.
        Storage copy = other.storage_;
        if (other.on_heap()) copy.heap = clone_heap(other);
        release();
        ndim_ = other.ndim_;
        storage_ = copy;
        return *this;
    }
    Layout& operator=(Layout&& other) noexcept {
        if (this == &other) return *this;
        release();
        ndim_ = std::exchange(other.ndim_, 0);  // the moved-from Layout is a valid 0-d scalar
        storage_ = other.storage_;
        return *this;
    }
    ~Layout() { release(); }

    int ndim() const noexcept { return ndim_; }
    std::span<const std::int64_t> shape() const noexcept { return {shape_data(), std::size_t(ndim_)}; }
    std::span<const std::int64_t> strides() const noexcept { return {strides_data(), std::size_t(ndim_)}; }
    // A negative axis counts from the end; out of range -> Error(index).
    std::int64_t shape(int axis) const { return shape_data()[normalize_axis(axis)]; }
    std::int64_t stride(int axis) const { return strides_data()[normalize_axis(axis)]; }

    // Product of the extents (1 for 0-d). Cannot overflow: see the invariants.
    std::int64_t size() const noexcept {
        std::int64_t n = 1;
        for (std::int64_t e : shape()) n *= e;
        return n;
    }
    bool empty() const noexcept {
        for (std::int64_t e : shape())
            if (e == 0) return true;
        return false;
    }

    // NumPy's (relaxed) rules: axes of extent 1 may have any stride; an empty layout is both.
    bool is_c_contiguous() const noexcept;
    bool is_f_contiguous() const noexcept;
    // The elements fill a block of size() consecutive elements exactly once: some permutation of
    // the axes, strides taken in absolute value, is C-contiguous. Empty layouts are dense.
    bool is_dense() const noexcept;
    // Some axis of extent > 1 has stride 0.
    bool has_broadcast() const noexcept;
    // Conservative: false only when no two indices can address one element. True for broadcasts
    // and for strides that interleave (e.g. shape (3, 2) strides (2, 3)), overlapping or not.
    bool may_overlap() const noexcept;

    // Bytes touched, negative strides included; {0, 0} when empty. itemsize < 0 or overflow ->
    // Error(value).
    Span byte_span(std::int64_t itemsize) const;

    // Views of the same elements. offset_elements of the result is where the new element 0 lies,
    // counted in elements from the old one; it is 0 whenever the result is empty (no element is
    // addressed, and this keeps a View's pointer inside its buffer).
    //
    // index: drops the axis; a negative i counts from the end; out of range -> Error(index).
    SlicedLayout index(int axis, std::int64_t i) const;
    // slice: Python semantics, clamping like PySlice_AdjustIndices; step 0 -> Error(value).
    SlicedLayout slice(int axis, const Slice& s) const;

    // axes must be a permutation of 0..ndim-1 (negative entries count from the end) -> else
    // Error(value).
    Layout permute(std::span<const int> axes) const;
    Layout transpose() const;  // axes reversed
    Layout squeeze() const;    // every axis of extent 1 dropped
    // Drops one axis; its extent must be 1 -> else Error(value).
    Layout squeeze(int axis) const;
    // Inserts an axis of extent 1 before `axis` (in [-ndim-1, ndim], negative counts from the end
    // as in np.expand_dims). Its stride is stride*extent of the axis that follows it (the product
    // of later extents for a contiguous layout, as NumPy), or 1 when appended last.
    Layout expand(int axis) const;
    // C-order reshape without a copy. One extent may be -1 (inferred). Sizes must match, and the
    // strides must be able to express the new shape -> else Error(value). An empty layout
    // reshapes to contiguous strides; a contiguous one to exactly contiguous(shape).
    Layout reshape(std::span<const std::int64_t> shape) const;
    // For copy loops, addressing the same elements in the same C order with fewer axes: extent-1
    // axes dropped, then axes i, i+1 merged when stride[i] == extent[i+1] * stride[i+1]. Axes are
    // never reordered, nor strides flipped. An empty layout becomes shape (0,) strides (1,); a
    // layout of size 1 becomes 0-d.
    Layout merged() const;

    friend bool operator==(const Layout& a, const Layout& b) noexcept;

private:
    struct Uninit {};
    // Shape and strides: inline (shape in [0, kInlineNdim), strides after), or one heap block of
    // 2*ndim entries (shape then strides). A trivially copyable union, so copies are memcpy.
    union Storage {
        std::int64_t dims[2 * kInlineNdim];
        std::int64_t* heap;
    };

    // Allocates room for ndim axes, contents unset: every caller fills all ndim entries of both.
    // Unused inline slots stay indeterminate; copying them is fine, since a union's copy copies
    // its object representation.
    Layout(int ndim, Uninit) : ndim_(ndim) {
        if (on_heap()) storage_.heap = new std::int64_t[2 * std::size_t(ndim)];
    }

    bool on_heap() const noexcept { return ndim_ > kInlineNdim; }
    const std::int64_t* shape_data() const noexcept { return on_heap() ? storage_.heap : storage_.dims; }
    const std::int64_t* strides_data() const noexcept {
        return on_heap() ? storage_.heap + ndim_ : storage_.dims + kInlineNdim;
    }
    std::int64_t* shape_mut() noexcept { return const_cast<std::int64_t*>(shape_data()); }
    std::int64_t* strides_mut() noexcept { return const_cast<std::int64_t*>(strides_data()); }
    void release() noexcept {
        if (on_heap()) delete[] storage_.heap;
    }
    static std::int64_t* clone_heap(const Layout& other);
    // Checks equal lengths and ndim <= kMaxNdim; returns ndim.
    static int checked_ndim(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);

    int normalize_axis(int axis) const {
        // Cannot overflow: axis < 0 and 0 <= ndim_ <= 64.
        const int a = axis < 0 ? axis + ndim_ : axis;
        if (a < 0 || a >= ndim_) [[unlikely]]
            fail_axis(axis);
        return a;
    }
    [[noreturn, gnu::cold]] void fail_axis(int axis) const;

    int ndim_;
    Storage storage_;
};

// The result of index/slice: the new layout and where its element 0 lies (see Layout::index).
struct SlicedLayout {
    Layout layout;
    std::int64_t offset_elements = 0;
};

// Whether bytes [offset + span.lo, offset + span.hi) lie inside [0, length), computed without
// overflow whatever the values (an interface's 'offset' is foreign input). An empty span is
// inside when 0 <= offset <= length.
bool span_within(Span span, std::int64_t offset, std::int64_t length) noexcept;

// "Layout(shape=(2, 3), strides=(3, 1))", for messages and test output.
std::ostream& operator<<(std::ostream& out, const Layout& layout);
// "shape (2, 3) with strides (3, 1)": a layout in the words of a Python user (tuples as Python
// prints them, no C++ type name), for messages that reach one.
std::string plain_layout(const Layout& layout);

}  // namespace stridex
