// stridex::Layout (layout.hpp): shapes and element strides, their checks and transformations.
#include "stridex/layout.hpp"

#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <sstream>

namespace stridex {

namespace {

// Python-style tuples in messages: "()", "(5,)", "(2, 3)".
template <class T>
struct Tuple {
    std::span<const T> values;
};
template <class T>
std::ostream& operator<<(std::ostream& out, Tuple<T> t) {
    out << '(';
    for (std::size_t i = 0; i < t.values.size(); ++i) out << (i ? ", " : "") << t.values[i];
    if (t.values.size() == 1) out << ',';
    return out << ')';
}
Tuple<std::int64_t> tuple(std::span<const std::int64_t> v) { return {v}; }
Tuple<int> tuple(std::span<const int> v) { return {v}; }

struct Described {
    const Layout& layout;
};
std::ostream& operator<<(std::ostream& out, Described d) {
    return out << "shape " << tuple(d.layout.shape()) << " with strides " << tuple(d.layout.strides());
}

bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool add_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) { return __builtin_add_overflow(a, b, out); }

// Checks ndim and extents, and that the product of the extents (0 counted as 1) fits in int64.
void check_shape(std::span<const std::int64_t> shape) {
    if (shape.size() > std::size_t(kMaxNdim))
        fail(ErrorKind::value, "a layout has at most ", kMaxNdim, " dimensions, found ", shape.size());
    std::int64_t product = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] < 0)
            fail(ErrorKind::value, "extents must be >= 0, found ", shape[i], " at axis ", i, " of shape ",
                 tuple(shape));
        if (mul_overflows(product, std::max<std::int64_t>(shape[i], 1), &product))
            fail(ErrorKind::value, "shape ", tuple(shape), " is too large: the product of its extents overflows int64");
    }
}

// Lowest and highest element offset over the axes of extent > 0 (see the invariants). Returns
// false when a sum overflows or when hi - lo does not fit, so that |stride| * (extent - 1) always
// fits and abs() of a used stride is safe.
bool element_span(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, std::int64_t* lo,
                  std::int64_t* hi) {
    std::int64_t low = 0, high = 0, reach = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] <= 1) continue;  // an axis of extent 0 or 1 never moves away from offset 0
        std::int64_t step = 0;
        if (mul_overflows(strides[i], shape[i] - 1, &step)) return false;
        if (add_overflows(step < 0 ? low : high, step, step < 0 ? &low : &high)) return false;
    }
    if (__builtin_sub_overflow(high, low, &reach)) return false;
    *lo = low;
    *hi = high;
    return true;
}

// Strides (C order when c_order, else Fortran) of a validated shape; extents of 0 count as 1.
void fill_contiguous(std::span<const std::int64_t> shape, std::int64_t* strides, bool c_order) {
    const std::size_t n = shape.size();
    std::int64_t step = 1;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = c_order ? n - 1 - k : k;
        strides[i] = step;
        step *= std::max<std::int64_t>(shape[i], 1);  // cannot overflow: check_shape passed
    }
}

// An axis of extent > 1, with its stride made absolute: what density and overlap depend on.
struct Axis {
    std::int64_t extent, stride;
};

// Axes of extent > 1 sorted by |stride|; returns how many. Strides of such axes fit after abs
// (invariant). Zero strides sort first.
int sorted_axes(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, Axis* axes) {
    int n = 0;
    for (std::size_t i = 0; i < shape.size(); ++i)
        if (shape[i] > 1) axes[n++] = {shape[i], std::abs(strides[i])};
    std::sort(axes, axes + n, [](const Axis& a, const Axis& b) { return a.stride < b.stride; });
    return n;
}

// Plain loops rather than std::copy: for a handful of entries they beat a call to memmove.
void copy_dims(std::span<const std::int64_t> from, std::int64_t* to) {
    for (std::size_t i = 0; i < from.size(); ++i) to[i] = from[i];
}

}  // namespace

void Layout::fail_axis(int axis) const {
    fail(ErrorKind::index, "axis ", axis, " is out of bounds for a layout of ", ndim_, " dimensions");
}

std::int64_t* Layout::clone_heap(const Layout& other) {
    const std::size_t n = 2 * std::size_t(other.ndim_);
    auto* block = new std::int64_t[n];
    std::memcpy(block, other.storage_.heap, n * sizeof(std::int64_t));
    return block;
}

int Layout::checked_ndim(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
    if (shape.size() != strides.size())
        fail(ErrorKind::value, "shape and strides must have the same length, found shape ", tuple(shape),
             " and strides ", tuple(strides));
    if (shape.size() > std::size_t(kMaxNdim))
        fail(ErrorKind::value, "a layout has at most ", kMaxNdim, " dimensions, found ", shape.size());
    return int(shape.size());
}

// The hot path of every import. One pass copies and validates, folding every check into one flag
// (no branch per check); only when it is raised does the slow path find which rule broke.
// ndim is checked before the (possible) allocation, so a bad one cannot ask for a huge block.
Layout::Layout(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides)
    : Layout(checked_ndim(shape, strides), Uninit{}) {
    std::int64_t* sh = shape_mut();
    std::int64_t* st = strides_mut();
    std::int64_t product = 1, lo = 0, hi = 0, step = 0, width = 0;
    bool bad = false;
    for (int i = 0; i < ndim_; ++i) {
        const std::int64_t e = shape[i], s = strides[i];
        sh[i] = e;
        st[i] = s;
        bad |= e < 0;
        bad |= mul_overflows(product, e > 1 ? e : 1, &product);  // 0 counted as 1: see invariants
        bad |= mul_overflows(s, e > 1 ? e - 1 : 0, &step);       // extent 0 or 1: never steps
        bad |= add_overflows(lo, std::min<std::int64_t>(step, 0), &lo);
        bad |= add_overflows(hi, std::max<std::int64_t>(step, 0), &hi);
    }
    bad |= __builtin_sub_overflow(hi, lo, &width);
    if (bad) [[unlikely]] {
        // Throws the precise error; the object is complete, so its destructor frees any block.
        check_shape(shape);
        if (!element_span(shape, strides, &lo, &hi))
            fail(ErrorKind::value, "the memory span of shape ", tuple(shape), " with strides ", tuple(strides),
                 " overflows int64");
        // Unreachable while the two paths agree; never accept a layout the fast path refused.
        fail(ErrorKind::value, "invalid layout: shape ", tuple(shape), " with strides ", tuple(strides));
    }
}

Layout Layout::from_byte_strides(std::span<const std::int64_t> shape, std::span<const std::int64_t> byte_strides,
                                 std::int64_t itemsize) {
    checked_ndim(shape, byte_strides);
    if (itemsize <= 0) fail(ErrorKind::value, "itemsize must be > 0, found ", itemsize);
    std::int64_t strides[kMaxNdim];
    for (std::size_t i = 0; i < byte_strides.size(); ++i) {
        if (byte_strides[i] % itemsize != 0)
            fail(ErrorKind::unsupported, "stride ", byte_strides[i], " bytes of axis ", i,
                 " is not a multiple of the item size ", itemsize,
                 ": strides must be multiples of it (stridex counts strides in elements)");
        strides[i] = byte_strides[i] / itemsize;
    }
    return Layout(shape, std::span<const std::int64_t>(strides, byte_strides.size()));
}

bool span_within(Span span, std::int64_t offset, std::int64_t length) noexcept {
    std::int64_t lo = 0, hi = 0;
    if (offset < 0 || length < 0 || add_overflows(offset, span.lo, &lo) || add_overflows(offset, span.hi, &hi))
        return false;
    return lo >= 0 && lo <= hi && hi <= length;
}

Layout Layout::contiguous(std::span<const std::int64_t> shape) {
    check_shape(shape);
    Layout out(int(shape.size()), Uninit{});
    copy_dims(shape, out.shape_mut());
    fill_contiguous(shape, out.strides_mut(), /*c_order=*/true);
    return out;
}

Layout Layout::f_contiguous(std::span<const std::int64_t> shape) {
    check_shape(shape);
    Layout out(int(shape.size()), Uninit{});
    copy_dims(shape, out.shape_mut());
    fill_contiguous(shape, out.strides_mut(), /*c_order=*/false);
    return out;
}

// One pass, no early exit on a mismatch: an empty layout is contiguous whatever its strides, and
// a zero extent may come after the mismatch. `expected` stays a product of nonzero extents: fits.
bool Layout::is_c_contiguous() const noexcept {
    const std::int64_t* sh = shape_data();
    const std::int64_t* st = strides_data();
    std::int64_t expected = 1;
    bool ok = true;
    for (int i = ndim_ - 1; i >= 0; --i) {
        if (sh[i] == 0) return true;
        if (sh[i] == 1) continue;  // never stepped along, so its stride is irrelevant
        ok &= st[i] == expected;
        expected *= sh[i];
    }
    return ok;
}

bool Layout::is_f_contiguous() const noexcept {
    const std::int64_t* sh = shape_data();
    const std::int64_t* st = strides_data();
    std::int64_t expected = 1;
    bool ok = true;
    for (int i = 0; i < ndim_; ++i) {
        if (sh[i] == 0) return true;
        if (sh[i] == 1) continue;
        ok &= st[i] == expected;
        expected *= sh[i];
    }
    return ok;
}

bool Layout::is_dense() const noexcept {
    if (empty()) return true;
    Axis axes[kMaxNdim];
    const int n = sorted_axes(shape(), strides(), axes);
    // Innermost to outermost, each axis must step exactly over the block of the axes inside it.
    // A zero stride fails at once (expected starts at 1), and so do equal strides.
    std::int64_t expected = 1;
    for (int k = 0; k < n; ++k) {
        if (axes[k].stride != expected) return false;
        expected *= axes[k].extent;  // at most size()
    }
    return true;
}

bool Layout::has_broadcast() const noexcept {
    const auto sh = shape();
    const auto st = strides();
    for (int i = 0; i < ndim_; ++i)
        if (sh[i] > 1 && st[i] == 0) return true;
    return false;
}

bool Layout::may_overlap() const noexcept {
    if (empty()) return false;
    Axis axes[kMaxNdim];
    const int n = sorted_axes(shape(), strides(), axes);
    // Sufficient for uniqueness: each stride exceeds the farthest offset the smaller-stride axes
    // reach together (a mixed-radix number system). Anything else is reported as may-overlap.
    std::int64_t reach = 0;
    for (int k = 0; k < n; ++k) {
        if (axes[k].stride <= reach) return true;        // also catches stride 0
        reach += axes[k].stride * (axes[k].extent - 1);  // at most hi - lo of the element span
    }
    return false;
}

Span Layout::byte_span(std::int64_t itemsize) const {
    if (itemsize < 0) fail(ErrorKind::value, "itemsize must be >= 0, found ", itemsize);
    if (empty()) return {};
    std::int64_t lo = 0, hi = 0;
    Span out;
    // The end is one item past the highest element: lo*itemsize and (hi+1)*itemsize must fit.
    if (!element_span(shape(), strides(), &lo, &hi) || mul_overflows(lo, itemsize, &out.lo) ||
        mul_overflows(hi, itemsize, &out.hi) || add_overflows(out.hi, itemsize, &out.hi))
        fail(ErrorKind::value, "the byte span of ", Described{*this}, " and itemsize ", itemsize, " overflows int64");
    return out;
}

SlicedLayout Layout::index(int axis, std::int64_t i) const {
    const int a = normalize_axis(axis);
    const std::int64_t n = shape_data()[a];
    const std::int64_t j = i < 0 ? i + n : i;  // i < 0 <= n: no overflow
    if (j < 0 || j >= n) fail(ErrorKind::index, "index ", i, " is out of bounds for axis ", a, " with size ", n);
    Layout out(ndim_ - 1, Uninit{});
    const auto sh = shape();
    const auto st = strides();
    for (int k = 0, o = 0; k < ndim_; ++k) {
        if (k == a) continue;
        out.shape_mut()[o] = sh[k];
        out.strides_mut()[o] = st[k];
        ++o;
    }
    // j * stride lies in the element span (0 <= j <= n-1), which fits.
    const std::int64_t offset = out.empty() ? 0 : j * st[a];
    return {std::move(out), offset};
}

SlicedLayout Layout::slice(int axis, const Slice& s) const {
    const int a = normalize_axis(axis);
    if (s.step == 0) fail(ErrorKind::value, "slice step cannot be zero");
    // As CPython: clamp the lowest step so that -step exists.
    const std::int64_t step = std::max(s.step, -INT64_MAX);
    const std::int64_t n = shape_data()[a];

    // PySlice_AdjustIndices: negative bounds count from the end, then clamp to the walkable range
    // ([0, n] forwards, [-1, n-1] backwards). Adding n to a negative bound cannot overflow.
    auto adjust = [&](std::optional<std::int64_t> bound, bool is_start) {
        if (!bound) return is_start ? (step < 0 ? n - 1 : 0) : (step < 0 ? std::int64_t(-1) : n);
        std::int64_t b = *bound;
        if (b < 0) {
            b += n;
            if (b < 0) b = step < 0 ? -1 : 0;
        } else if (b >= n) {
            b = step < 0 ? n - 1 : n;
        }
        return b;
    };
    const std::int64_t start = adjust(s.start, /*is_start=*/true);
    const std::int64_t stop = adjust(s.stop, /*is_start=*/false);
    std::int64_t length = 0;  // start, stop in [-1, n]: differences cannot overflow
    if (step > 0 && start < stop) length = (stop - start - 1) / step + 1;
    if (step < 0 && stop < start) length = (start - stop - 1) / -step + 1;

    const std::int64_t old_stride = strides_data()[a];
    std::int64_t new_stride = 0;
    // With length > 1, |step| <= n-1 so stride*step lies in the element span. With length <= 1 the
    // stride is never used and may overflow: keep the old one then.
    if (mul_overflows(old_stride, step, &new_stride)) new_stride = old_stride;

    Layout out(*this);
    out.shape_mut()[a] = length;
    out.strides_mut()[a] = new_stride;
    // With length > 0, start is an index in [0, n-1]: start*stride lies in the element span.
    const std::int64_t offset = out.empty() ? 0 : start * old_stride;
    return {std::move(out), offset};
}

Layout Layout::permute(std::span<const int> axes) const {
    if (axes.size() != std::size_t(ndim_))
        fail(ErrorKind::value, "axes ", tuple(axes), " are not a permutation of the ", ndim_, " axes of ",
             Described{*this}, ": expected ", ndim_, " entries, found ", axes.size());
    Layout out(ndim_, Uninit{});
    std::uint64_t seen = 0;  // one bit per axis: kMaxNdim == 64
    static_assert(kMaxNdim <= 64);
    for (int k = 0; k < ndim_; ++k) {
        // axes[k] + ndim_ only for negative entries: cannot overflow.
        const int a = axes[k] < 0 ? axes[k] + ndim_ : axes[k];
        if (a < 0 || a >= ndim_)
            fail(ErrorKind::value, "axes ", tuple(axes), " are not a permutation of the ", ndim_,
                 " axes of a layout: entry ", axes[k], " is out of range");
        const std::uint64_t bit = std::uint64_t(1) << a;
        if (seen & bit)
            fail(ErrorKind::value, "axes ", tuple(axes), " are not a permutation of the ", ndim_,
                 " axes of a layout: axis ", a, " repeats");
        seen |= bit;
        out.shape_mut()[k] = shape_data()[a];
        out.strides_mut()[k] = strides_data()[a];
    }
    return out;
}

Layout Layout::transpose() const {
    Layout out(ndim_, Uninit{});
    std::reverse_copy(shape_data(), shape_data() + ndim_, out.shape_mut());
    std::reverse_copy(strides_data(), strides_data() + ndim_, out.strides_mut());
    return out;
}

Layout Layout::squeeze() const {
    const auto sh = shape();
    const int kept = int(std::count_if(sh.begin(), sh.end(), [](std::int64_t e) { return e != 1; }));
    Layout out(kept, Uninit{});
    for (int k = 0, o = 0; k < ndim_; ++k) {
        if (sh[k] == 1) continue;
        out.shape_mut()[o] = sh[k];
        out.strides_mut()[o] = strides_data()[k];
        ++o;
    }
    return out;
}

Layout Layout::squeeze(int axis) const {
    const int a = normalize_axis(axis);
    if (shape_data()[a] != 1)
        fail(ErrorKind::value, "cannot squeeze axis ", a, " of ", Described{*this}, ": expected extent 1, found ",
             shape_data()[a]);
    return index(a, 0).layout;
}

Layout Layout::expand(int axis) const {
    if (ndim_ == kMaxNdim)
        fail(ErrorKind::value, "cannot expand ", Described{*this}, ": a layout has at most ", kMaxNdim, " dimensions");
    const int a = axis < 0 ? axis + ndim_ + 1 : axis;
    if (a < 0 || a > ndim_)
        fail(ErrorKind::index, "axis ", axis, " is out of bounds for inserting into a layout of ", ndim_,
             " dimensions: expected -", ndim_ + 1, " to ", ndim_);
    std::int64_t stride = 1;
    if (a < ndim_) {
        // Keep the new axis C-contiguous with the one after it (0 extents count as 1, as in
        // contiguous()). The new axis has extent 1, so its stride is never used: if the product
        // overflows, any value will do; keep the follower's.
        stride = strides_data()[a];
        if (mul_overflows(stride, std::max<std::int64_t>(shape_data()[a], 1), &stride)) stride = strides_data()[a];
    }
    Layout out(ndim_ + 1, Uninit{});
    for (int k = 0, o = 0; o <= ndim_; ++o) {
        if (o == a) {
            out.shape_mut()[o] = 1;
            out.strides_mut()[o] = stride;
        } else {
            out.shape_mut()[o] = shape_data()[k];
            out.strides_mut()[o] = strides_data()[k];
            ++k;
        }
    }
    return out;
}

Layout Layout::reshape(std::span<const std::int64_t> new_shape) const {
    if (new_shape.size() > std::size_t(kMaxNdim))
        fail(ErrorKind::value, "a layout has at most ", kMaxNdim, " dimensions, found ", new_shape.size(), " in shape ",
             tuple(new_shape));
    const int nd = int(new_shape.size());
    const std::int64_t total = size();
    auto fail_size = [&] {
        fail(ErrorKind::value, "cannot reshape a layout of size ", total, " into shape ", tuple(new_shape));
    };

    // Resolve the one allowed -1 from the known extents.
    int unknown = -1;
    std::int64_t known = 1;  // product of the known extents, 0 counted as 1
    bool has_zero = false;
    for (int i = 0; i < nd; ++i) {
        const std::int64_t e = new_shape[i];
        if (e == -1) {
            if (unknown >= 0) fail(ErrorKind::value, "can only infer one extent (-1), found shape ", tuple(new_shape));
            unknown = i;
        } else if (e < 0) {
            fail(ErrorKind::value, "extents must be >= 0 or -1 (inferred), found ", e, " in shape ", tuple(new_shape));
        } else {
            has_zero |= e == 0;
            if (mul_overflows(known, std::max<std::int64_t>(e, 1), &known)) fail_size();
        }
    }
    if (has_zero) known = 0;
    Layout out(nd, Uninit{});
    std::int64_t* ns = out.shape_mut();
    copy_dims(new_shape, ns);
    if (unknown >= 0) {
        // As NumPy: nothing to infer from when a known extent is 0.
        if (known == 0 || total % known != 0) fail_size();
        ns[unknown] = total / known;
    } else if (known != total) {
        fail_size();
    }
    // Now the product of the extents is total (fits), and with no zero extents the product with 0
    // counted as 1 is the same; with a zero, `known` above checked it.
    std::int64_t* nst = out.strides_mut();
    if (total == 0) {
        // No element is addressed: any strides do, so take contiguous ones.
        fill_contiguous(out.shape(), nst, /*c_order=*/true);
        return out;
    }

    // Old axes of extent 1 are never stepped along; leave them out.
    std::int64_t oe[kMaxNdim], os[kMaxNdim];
    int on = 0;
    for (int i = 0; i < ndim_; ++i) {
        if (shape_data()[i] == 1) continue;
        oe[on] = shape_data()[i];
        os[on] = strides_data()[i];
        ++on;
    }

    // Walk both shapes in step, in groups: the fewest old axes [oi, oj) and new axes [ni, nj) whose
    // extents have equal products. A group is expressible iff its old axes merge into one in C
    // order; then its new axes split that merged axis, innermost stride first. Products stay
    // <= total, and the shapes have equal products, so neither side runs out mid-group.
    int oi = 0, ni = 0;
    while (oi < on) {
        int oj = oi + 1, nj = ni;
        std::int64_t op = oe[oi], np = 1;
        while (np != op) {
            if (np < op) {
                np *= ns[nj++];  // leading extent-1 axes of the new shape join here
            } else {
                std::int64_t outer = 0;
                if (mul_overflows(oe[oj], os[oj], &outer) || outer != os[oj - 1])
                    fail(ErrorKind::value, "cannot reshape ", Described{*this}, " into shape ", tuple(new_shape),
                         " without a copy");
                op *= oe[oj++];
            }
        }
        nst[nj - 1] = os[oj - 1];
        for (int k = nj - 1; k > ni; --k) {
            // Overflow only for extent-1 axes at the group's front (an axis of extent > 1 has a
            // stride inside the element span), whose stride is never used: keep the inner one.
            if (mul_overflows(nst[k], ns[k], &nst[k - 1])) nst[k - 1] = nst[k];
        }
        oi = oj;
        ni = nj;
    }
    // Whatever is left of the new shape has extent 1; give it what contiguous() would.
    for (; ni < nd; ++ni) nst[ni] = 1;
    return out;
}

Layout Layout::merged() const {
    if (empty()) {
        const std::int64_t zero = 0, one = 1;
        return unchecked({&zero, 1}, {&one, 1});
    }
    std::int64_t me[kMaxNdim], ms[kMaxNdim];
    int m = 0;
    for (int i = 0; i < ndim_; ++i) {
        const std::int64_t e = shape_data()[i], s = strides_data()[i];
        if (e == 1) continue;
        std::int64_t outer = 0;
        // The previous kept axis steps exactly over this one: one axis of extent e_prev*e.
        if (m > 0 && !mul_overflows(e, s, &outer) && outer == ms[m - 1]) {
            me[m - 1] *= e;  // a sub-product of size(): fits
            ms[m - 1] = s;
        } else {
            me[m] = e;
            ms[m] = s;
            ++m;
        }
    }
    const std::size_t count = std::size_t(m);
    return unchecked({me, count}, {ms, count});
}

bool operator==(const Layout& a, const Layout& b) noexcept {
    return a.ndim_ == b.ndim_ && std::equal(a.shape_data(), a.shape_data() + a.ndim_, b.shape_data()) &&
           std::equal(a.strides_data(), a.strides_data() + a.ndim_, b.strides_data());
}

std::string plain_layout(const Layout& layout) {
    std::ostringstream out;
    out << Described{layout};
    return out.str();
}

std::ostream& operator<<(std::ostream& out, const Layout& layout) {
    return out << "Layout(shape=" << tuple(layout.shape()) << ", strides=" << tuple(layout.strides()) << ')';
}

}  // namespace stridex
