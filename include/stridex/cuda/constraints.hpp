// Typed constraints on a View: what a function taking an array requires of it.
//
//     using Vec = stridex::Arg<stridex::arg::dtype<float>, stridex::arg::ndim<1>, stridex::arg::cuda,
//                              stridex::arg::writable>;
//
// Arg (include/stridex/cuda/arg.hpp) carries them: the casters (include/stridex/python/) check them when
// a Python argument is converted, the XLA FFI handler (include/stridex/xla/ffi.hpp) on every call;
// check() and conform() below are the same rules for C++ callers. Every constraint is a tag type;
// Requirements collects them at compile time, and description<C...>() renders them as one
// compile-time string, "stridex.View[dtype=float32, ndim=1, device=cuda, writable]", which the
// binding libraries print in signatures and overload errors.
//
// No silent copies: a View either satisfies the constraints as it is, or (only with arg::may_copy,
// and only for the layout) is copied into a fresh contiguous buffer. Nothing else is ever converted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "stridex/device.hpp"
#include "stridex/dtype.hpp"
#include "stridex/view.hpp"

namespace stridex {

enum class Contiguity : unsigned char { any, c, f };

// The constraints of one argument, gathered from its tags. A plain aggregate so that it can be a
// compile-time constant.
struct Requirements {
    static constexpr int kMaxShapeRank = 16;  // shape<...> constraints spell at most this many axes
    static constexpr std::int64_t kAnyExtent = -1;

    bool has_dtype = false;
    Dtype dtype = dtypes::float32;
    int ndim = -1;  // -1: any rank
    bool has_shape = false;
    std::array<std::int64_t, kMaxShapeRank> shape{};  // the first `ndim` entries; kAnyExtent: any
    bool has_device = false;
    DeviceType device_type = DeviceType::kCPU;
    std::int32_t device_id = -1;  // -1: any ordinal
    Contiguity order = Contiguity::any;
    bool writable = false;       // read-only views refused
    bool output = false;         // written, never read (implies writable): a result of its own in XLA
    bool may_copy = false;       // a layout that is not `order` is copied (host memory only, for now)
    bool caller_stream = false;  // order the data on the calling framework's current stream

    friend constexpr bool operator==(const Requirements&, const Requirements&) = default;
};

// The tags. Each applies itself to a Requirements; contradicting tags (two dtypes, two ranks...)
// stop compilation with a message.
namespace arg {

inline constexpr std::int64_t any = Requirements::kAnyExtent;

template <Dtype D>
struct dtype_is {
    static constexpr void apply(Requirements& r) {
        if (r.has_dtype) throw "stridex::arg: two dtype constraints";
        r.has_dtype = true;
        r.dtype = D;
    }
};
// The dtype of a C++ element type (float -> float32); dtype_is<dtypes::bfloat16> for the others.
template <class T>
using dtype = dtype_is<dtype_of<T>()>;

template <int N>
struct ndim {
    static_assert(N >= 0 && N <= kMaxNdim, "stridex::arg::ndim: rank out of range");
    static constexpr void apply(Requirements& r) {
        if (r.ndim != -1 && r.ndim != N) throw "stridex::arg: ndim contradicts another rank or shape";
        r.ndim = N;
    }
};

// shape<any, 3>: two axes, the second of extent 3. Implies the rank.
template <std::int64_t... Extents>
struct shape {
    static_assert(sizeof...(Extents) <= Requirements::kMaxShapeRank, "stridex::arg::shape: too many axes");
    static_assert(((Extents >= 0 || Extents == any) && ...), "stridex::arg::shape: extents are >= 0 or arg::any");
    static constexpr void apply(Requirements& r) {
        if (r.has_shape) throw "stridex::arg: two shape constraints";
        ndim<static_cast<int>(sizeof...(Extents))>::apply(r);
        r.has_shape = true;
        std::size_t i = 0;
        ((r.shape[i++] = Extents), ...);
    }
};

// device<DeviceType::kCUDA> any CUDA device; device<DeviceType::kCUDA, 1> cuda:1 only.
template <DeviceType Type, std::int32_t Id = -1>
struct device {
    static_assert(Id >= -1, "stridex::arg::device: the ordinal is >= 0, or -1 for any");
    static constexpr void apply(Requirements& r) {
        if (r.has_device) throw "stridex::arg: two device constraints";
        r.has_device = true;
        r.device_type = Type;
        r.device_id = Id;
    }
};
using cpu = device<DeviceType::kCPU>;
using cuda = device<DeviceType::kCUDA>;
using cuda_host = device<DeviceType::kCUDAHost>;
using cuda_managed = device<DeviceType::kCUDAManaged>;

template <Contiguity O>
struct order_is {
    static constexpr void apply(Requirements& r) {
        if (r.order != Contiguity::any && r.order != O) throw "stridex::arg: two contiguity constraints";
        r.order = O;
    }
};
using c_contig = order_is<Contiguity::c>;  // NumPy's C-contiguity (axes of extent 1 take any stride)
using f_contig = order_is<Contiguity::f>;
using any_contig = order_is<Contiguity::any>;

struct writable {
    static constexpr void apply(Requirements& r) { r.writable = true; }
};

// A parameter the function only writes, every element, without reading it first: to nanobind and
// pybind11 a writable argument like any other; to XLA (include/stridex/xla/ffi.hpp) a result of its
// own, where a writable parameter is read and written in place (its operand aliased to a result).
struct output {
    static constexpr void apply(Requirements& r) {
        r.writable = true;
        r.output = true;
    }
};

// The one explicit copy: a view whose layout is not the requested contiguity is copied into a
// fresh buffer of that order (with c_contig or f_contig only). Writes to a copy would be lost, so
// may_copy and writable exclude each other.
struct may_copy {
    static constexpr void apply(Requirements& r) { r.may_copy = true; }
};

// The data arrives ordered on the calling framework's current stream (torch.cuda.current_stream()
// for a torch tensor, through its DLPack exchange API), and View::stream() says which: launch
// there. Frameworks without an exchange API get the default contract (the legacy default stream).
struct caller_stream {
    static constexpr void apply(Requirements& r) { r.caller_stream = true; }
};

}  // namespace arg

template <class... Constraints>
constexpr Requirements requirements_of() {
    Requirements r;
    (Constraints::apply(r), ...);
    if (r.may_copy && r.order == Contiguity::any) throw "stridex::arg::may_copy needs arg::c_contig or arg::f_contig";
    if (r.may_copy && r.writable) throw "stridex::arg::may_copy and arg::writable exclude each other";
    return r;
}

// ---- descriptions, built at compile time ------------------------------------------------------

namespace detail {

// Appends to `out` (or only counts when out is null): one writer serves the length and the text.
struct TextWriter {
    char* out = nullptr;
    std::size_t size = 0;
    constexpr void put(char c) {
        if (out) out[size] = c;
        ++size;
    }
    constexpr void put(const char* s) {
        while (*s) put(*s++);
    }
    constexpr void put_int(std::int64_t v) {
        if (v < 0) {
            put('-');
            v = -v;
        }
        char digits[20] = {};
        int n = 0;
        do {
            digits[n++] = static_cast<char>('0' + v % 10);
            v /= 10;
        } while (v);
        while (n) put(digits[--n]);
    }
};

// The canonical dtype names (the same as Dtype::name(), which is not constexpr).
constexpr const char* dtype_code_name(DtypeCode code) {
    switch (code) {
        case DtypeCode::kInt: return "int";
        case DtypeCode::kUInt: return "uint";
        case DtypeCode::kFloat: return "float";
        case DtypeCode::kOpaqueHandle: return "handle";
        case DtypeCode::kBfloat: return "bfloat";
        case DtypeCode::kComplex: return "complex";
        case DtypeCode::kBool: return "bool";
        case DtypeCode::kFloat8_e3m4: return "float8_e3m4";
        case DtypeCode::kFloat8_e4m3: return "float8_e4m3";
        case DtypeCode::kFloat8_e4m3b11fnuz: return "float8_e4m3b11fnuz";
        case DtypeCode::kFloat8_e4m3fn: return "float8_e4m3fn";
        case DtypeCode::kFloat8_e4m3fnuz: return "float8_e4m3fnuz";
        case DtypeCode::kFloat8_e5m2: return "float8_e5m2";
        case DtypeCode::kFloat8_e5m2fnuz: return "float8_e5m2fnuz";
        case DtypeCode::kFloat8_e8m0fnu: return "float8_e8m0fnu";
        case DtypeCode::kFloat6_e2m3fn: return "float6_e2m3fn";
        case DtypeCode::kFloat6_e3m2fn: return "float6_e3m2fn";
        case DtypeCode::kFloat4_e2m1fn: return "float4_e2m1fn";
    }
    return "unknown";
}

constexpr void write_dtype(TextWriter& w, Dtype d) {
    w.put(dtype_code_name(d.code));
    // Names that carry their width already (bool, float8_*, ...) take no number.
    const bool sized = d.code <= DtypeCode::kComplex && d.code != DtypeCode::kOpaqueHandle;
    if (sized) w.put_int(d.bits);
    if (d.lanes != 1) {
        w.put('x');
        w.put_int(d.lanes);
    }
}

constexpr const char* device_type_text(DeviceType t) {
    switch (t) {
        case DeviceType::kCPU: return "cpu";
        case DeviceType::kCUDA: return "cuda";
        case DeviceType::kCUDAHost: return "cuda_host";
        case DeviceType::kCUDAManaged: return "cuda_managed";
        case DeviceType::kROCM: return "rocm";
        case DeviceType::kROCMHost: return "rocm_host";
        default: return "other";
    }
}

// "stridex.View[dtype=float32, shape=(*, 3), device=cuda, order=C, writable]"; "stridex.View" when
// nothing is required.
constexpr void write_requirements(TextWriter& w, const Requirements& r) {
    w.put("stridex.View");
    bool first = true;
    auto item = [&](const char* text) {
        w.put(first ? "[" : ", ");
        first = false;
        w.put(text);
    };
    if (r.has_dtype) {
        item("dtype=");
        write_dtype(w, r.dtype);
    }
    if (r.has_shape) {
        item("shape=(");
        for (int a = 0; a < r.ndim; ++a) {
            if (a) w.put(", ");
            const std::int64_t e = r.shape[static_cast<std::size_t>(a)];
            if (e == arg::any)
                w.put('*');
            else
                w.put_int(e);
        }
        w.put(r.ndim == 1 ? ",)" : ")");
    } else if (r.ndim != -1) {
        item("ndim=");
        w.put_int(r.ndim);
    }
    if (r.has_device) {
        item("device=");
        w.put(device_type_text(r.device_type));
        if (r.device_id != -1) {
            w.put(':');
            w.put_int(r.device_id);
        }
    }
    if (r.order != Contiguity::any) item(r.order == Contiguity::c ? "order=C" : "order=F");
    if (r.writable) item("writable");
    if (r.output) item("output");
    if (r.may_copy) item("may_copy");
    if (r.caller_stream) item("caller_stream");
    if (!first) w.put(']');
}

template <std::size_t N>
struct FixedText {
    char data[N + 1] = {};
};

template <class... Constraints>
struct Described {
    static constexpr Requirements requirements = requirements_of<Constraints...>();
    static constexpr std::size_t size = [] {
        TextWriter w;
        write_requirements(w, requirements);
        return w.size;
    }();
    static constexpr FixedText<size> text = [] {
        FixedText<size> t;
        TextWriter w{t.data};
        write_requirements(w, requirements);
        return t;
    }();
};

}  // namespace detail

// The compile-time description of a constraint list, as a char array (for signatures).
template <class... Constraints>
constexpr const auto& description() {
    return detail::Described<Constraints...>::text.data;
}

// ---- checking (here, inline, and src/cuda/constraints.cpp) -------------------------------------

namespace detail {

inline bool order_holds(Contiguity order, const Layout& layout) noexcept {
    switch (order) {
        case Contiguity::any: return true;
        case Contiguity::c: return layout.is_c_contiguous();
        case Contiguity::f: return layout.is_f_contiguous();
    }
    return false;
}

// Everything but the contiguity.
inline bool satisfies_except_order(const Requirements& r, const View& view) noexcept {
    if (r.has_dtype && view.dtype() != r.dtype) return false;
    if (r.ndim != -1 && view.ndim() != r.ndim) return false;
    if (r.has_shape)
        for (int a = 0; a < r.ndim; ++a) {
            const std::int64_t want = r.shape[static_cast<std::size_t>(a)];
            if (want != arg::any && view.shape()[static_cast<std::size_t>(a)] != want) return false;
        }
    if (r.has_device && (view.device().type != r.device_type || (r.device_id != -1 && view.device().id != r.device_id)))
        return false;
    if (r.writable && view.readonly()) return false;
    return true;
}

}  // namespace detail

// Does `view` meet `r` as it is? (may_copy and caller_stream play no part here.) Inline: every door
// checks a compile-time Requirements (Arg<...>::requirements), whose unused constraints then cost
// nothing on the hot path of a call.
inline bool satisfies(const Requirements& r, const View& view) noexcept {
    return detail::satisfies_except_order(r, view) && detail::order_holds(r.order, view.layout());
}

// What a view is, in the terms of the descriptions: "float64, shape=(3, 2), strides=(1, 3),
// device=cpu, read-only".
std::string view_summary(const View& view);

// "expected stridex.View[dtype=float32], found float64, shape=(3,), ..." -- Error(type) -- unless
// `view` satisfies `r`; with r.may_copy, a view failing only the contiguity is copied instead
// (see contiguous_copy). Returns the view to use.
View conform(const Requirements& r, const View& view);

// A fresh `order`-contiguous copy of `view` on its own device, for arg::may_copy, made by the copy
// engine (stridex::copy_to) after the view's pending work; errors are the copy engine's.
View contiguous_copy(const View& view, Contiguity order);

}  // namespace stridex
