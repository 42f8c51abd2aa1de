// XLA FFI handlers generated from stridex signatures: the function an extension binds with nanobind
// or pybind11 (stridex::Arg parameters, include/stridex/cuda/arg.hpp) called inside jax.jit.
//
//     #include <stridex/xla/ffi.hpp>       // needs only XLA's FFI headers: jax.ffi.include_dir()
//
//     void saxpy(float a, Arg<arg::dtype<float>, arg::ndim<1>, arg::cuda, arg::caller_stream> x,
//                Arg<arg::dtype<float>, arg::ndim<1>, arg::cuda, arg::writable, arg::caller_stream> y);
//
//     using SaxpyXla = stridex::xla_ffi::Cuda<&saxpy, "a", "x", "y">;   // one name per parameter
//     // SaxpyXla::handler: the XLA_FFI_Handler; SaxpyXla::target: what stridex.jax.ffi_function takes
//
// What each parameter becomes (docs/extensions.md, "Inside jax.jit"):
//   Arg<...>                        an operand: a read-only View of XLA's buffer (zero-copy)
//   Arg<..., arg::writable>         an operand written in place: the operand aliased to a result
//                                   (input_output_aliases), the View is the result's buffer, writable
//   Arg<..., arg::output>           a result only: a writable View of the buffer XLA allocated
//   const View&                     an operand without constraints
//   bool, intN_t, uintN_t, float,   an attribute of that exact dtype, by the parameter's name
//   double, std::complex<...>
// and a function's return value: void, or an arithmetic value written into one more result, 0-d.
// Results come in parameter order (writable, then output parameters as they appear), the return
// value last. Every operand and result is checked against its parameter's constraints on every
// call; a violation is an ffi::Error (INVALID_ARGUMENT) naming the parameter, what it expects and
// what it got, and any exception the function throws becomes an ffi::Error with its message.
//
// Buffers are XLA's dense row-major arrays (the layout ffi_call asks for by default): the View has
// C-order strides, the device of the platform (cpu on the host; cuda:N on CUDA, N the ordinal XLA
// runs the call on) and no owner (XLA keeps the memory alive for the call). Streams on CUDA: an
// arg::caller_stream parameter is on XLA's stream (View::stream() is the handle XLA gives the
// handler: launch there). A parameter without it keeps the contract it has through the casters, the
// legacy default stream: XLA's stream is ordered before it, and after the call it is ordered
// before XLA's stream again (an event each way, no host block). On the host View::stream() is
// kNoStream.
//
// The signature travels with the handler, as JSON (`target.signature`), so that the Python side
// (stridex.jax.ffi_function) checks each constraint at trace time, from the abstract values alone.
#pragma once

#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xla/ffi/api/ffi.h"

#include "stridex/cuda/arg.hpp"
#include "stridex/cuda/constraints.hpp"
#include "stridex/cuda/copy.hpp"
#include "stridex/cuda/stream.hpp"
#include "stridex/error.hpp"
#include "stridex/view.hpp"

extern "C" {

// One handler and its signature, in C: what a module exports (as a PyCapsule named
// "stridex.xla_target", or as a C symbol a ctypes user reads) and stridex.jax.ffi_function
// registers with JAX. Frozen at abi 1: fields are only ever appended.
typedef struct StridexXlaTarget {
    uint32_t abi;              // STRIDEX_XLA_TARGET_ABI
    uint32_t reserved;         // 0
    XLA_FFI_Handler* handler;  // the execute stage's handler
    const char* platform;      // "cpu" or "CUDA": jax.ffi.register_ffi_target's platform
    const char* signature;     // JSON: every parameter's kind, name and constraints (docs/extensions.md)
} StridexXlaTarget;

}  // extern "C"

#define STRIDEX_XLA_TARGET_ABI 1

namespace stridex::xla_ffi {

inline constexpr char kTargetCapsule[] = "stridex.xla_target";

enum class Platform { host, cuda };

// A parameter's name as a template argument: Host<&fill, "x", "value">.
template <std::size_t N>
struct Name {
    char text[N]{};
    constexpr Name(const char (&s)[N]) {  // NOLINT: implicit, from a string literal
        for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
    }
};

namespace detail {

using ::stridex::detail::TextWriter;

enum class Kind { in, inout, out, attr };

// What a parameter type is to XLA.
template <class P>
struct Param {
    static_assert(std::is_arithmetic_v<P> || std::is_same_v<P, std::complex<float>> ||
                      std::is_same_v<P, std::complex<double>>,
                  "stridex::xla_ffi: a parameter is a stridex::Arg, a const View&, or an attribute: bool, an "
                  "integer, float, double or std::complex of them");
    static constexpr Kind kind = Kind::attr;
    static constexpr Requirements requirements{};
    static constexpr Dtype dtype = dtype_of<P>();
};
template <class... Constraints>
struct Param<Arg<Constraints...>> {
    static constexpr Requirements requirements = Arg<Constraints...>::requirements;
    static constexpr Kind kind = requirements.output ? Kind::out : requirements.writable ? Kind::inout : Kind::in;
    static constexpr Dtype dtype{};
};
template <>
struct Param<View> {
    static constexpr Requirements requirements{};
    static constexpr Kind kind = Kind::in;
    static constexpr Dtype dtype{};
};

// The XLA attribute type of a scalar parameter: exactly the C type XLA decodes for its dtype.
template <class P>
using AttrType = std::conditional_t<
    std::is_same_v<P, bool> || !std::is_integral_v<P>, P,
    std::conditional_t<
        std::is_signed_v<P>,
        std::conditional_t<sizeof(P) == 1, std::int8_t,
                           std::conditional_t<sizeof(P) == 2, std::int16_t,
                                              std::conditional_t<sizeof(P) == 4, std::int32_t, std::int64_t>>>,
        std::conditional_t<sizeof(P) == 1, std::uint8_t,
                           std::conditional_t<sizeof(P) == 2, std::uint16_t,
                                              std::conditional_t<sizeof(P) == 4, std::uint32_t, std::uint64_t>>>>>;

template <class F>
struct Function;
template <class R, class... Ps>
struct Function<R (*)(Ps...)> {
    using Return = R;
    using Params = std::tuple<std::remove_cvref_t<Ps>...>;
    static constexpr std::size_t arity = sizeof...(Ps);
};
template <class R, class... Ps>
struct Function<R (*)(Ps...) noexcept> : Function<R (*)(Ps...)> {};

template <class R>
constexpr bool returns_scalar() {
    if constexpr (std::is_void_v<R>) {
        return false;
    } else {
        static_assert(std::is_arithmetic_v<R> || std::is_same_v<R, std::complex<float>> ||
                          std::is_same_v<R, std::complex<double>>,
                      "stridex::xla_ffi: the function returns void or an arithmetic value (a 0-d result); XLA "
                      "allocates every result, so write arrays into an arg::output parameter");
        return true;
    }
}

constexpr bool is_identifier(const char* s) {
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
    for (++s; *s; ++s)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

// XLA's element types as stridex Dtypes; bits 0 where stridex has none for it (TOKEN; the sub-byte
// integers and float4, whose storage XLA's backends do not agree on, so no View is made of them).
constexpr Dtype dtype_of_xla_switch(int t) noexcept {
    using ::xla::ffi::DataType;
    switch (static_cast<DataType>(t)) {
        case DataType::PRED: return dtypes::bool_;
        case DataType::S8: return dtypes::int8;
        case DataType::S16: return dtypes::int16;
        case DataType::S32: return dtypes::int32;
        case DataType::S64: return dtypes::int64;
        case DataType::U8: return dtypes::uint8;
        case DataType::U16: return dtypes::uint16;
        case DataType::U32: return dtypes::uint32;
        case DataType::U64: return dtypes::uint64;
        case DataType::F16: return dtypes::float16;
        case DataType::F32: return dtypes::float32;
        case DataType::F64: return dtypes::float64;
        case DataType::BF16: return dtypes::bfloat16;
        case DataType::C64: return dtypes::complex64;
        case DataType::C128: return dtypes::complex128;
        case DataType::F8E5M2: return {DtypeCode::kFloat8_e5m2, 8, 1};
        case DataType::F8E4M3: return {DtypeCode::kFloat8_e4m3, 8, 1};
        case DataType::F8E4M3FN: return {DtypeCode::kFloat8_e4m3fn, 8, 1};
        case DataType::F8E4M3B11FNUZ: return {DtypeCode::kFloat8_e4m3b11fnuz, 8, 1};
        case DataType::F8E5M2FNUZ: return {DtypeCode::kFloat8_e5m2fnuz, 8, 1};
        case DataType::F8E4M3FNUZ: return {DtypeCode::kFloat8_e4m3fnuz, 8, 1};
        case DataType::F8E3M4: return {DtypeCode::kFloat8_e3m4, 8, 1};
        case DataType::F8E8M0FNU: return {DtypeCode::kFloat8_e8m0fnu, 8, 1};
        default: return {DtypeCode::kInt, 0, 1};
    }
}
// The same as a table, for the hot path: one load per buffer.
inline constexpr int kXlaTypes = 64;
inline constexpr std::array<Dtype, kXlaTypes> kDtypeOfXla = [] {
    std::array<Dtype, kXlaTypes> table{};
    for (int t = 0; t < kXlaTypes; ++t) table[static_cast<std::size_t>(t)] = dtype_of_xla_switch(t);
    return table;
}();
static_assert(kDtypeOfXla[XLA_FFI_DataType_F32] == dtypes::float32 && kDtypeOfXla[XLA_FFI_DataType_TOKEN].bits == 0);
constexpr Dtype dtype_of_xla(XLA_FFI_DataType t) noexcept {
    const auto i = static_cast<unsigned>(t);
    return i < static_cast<unsigned>(kXlaTypes) ? kDtypeOfXla[i] : Dtype{DtypeCode::kInt, 0, 1};
}

// A refused call: the error XLA gets.
struct Refusal {
    ::xla::ffi::ErrorCode code;
    std::string message;
};

template <class... Parts>
[[noreturn, gnu::cold, gnu::noinline]] void refuse(const Parts&... parts) {
    std::ostringstream out;
    out << "stridex XLA handler: ";
    (out << ... << parts);
    throw Refusal{::xla::ffi::ErrorCode::kInvalidArgument, out.str()};
}

// The signature as JSON, written at compile time (the same writer serves the length and the text).
constexpr void put_bool(TextWriter& w, bool b) { w.put(b ? "true" : "false"); }

constexpr void write_param(TextWriter& w, const char* name, Kind kind, const Requirements& r, Dtype scalar) {
    w.put("{\"name\":\"");
    w.put(name);
    w.put("\",\"kind\":\"");
    w.put(kind == Kind::in ? "in" : kind == Kind::inout ? "inout" : kind == Kind::out ? "out" : "attr");
    w.put("\",\"dtype\":");
    if (kind == Kind::attr || r.has_dtype) {
        w.put('"');
        ::stridex::detail::write_dtype(w, kind == Kind::attr ? scalar : r.dtype);
        w.put('"');
    } else {
        w.put("null");
    }
    if (kind != Kind::attr) {
        w.put(",\"constraints\":\"");
        ::stridex::detail::write_requirements(w, r);
        w.put("\",\"ndim\":");
        w.put_int(r.ndim);
        w.put(",\"shape\":");
        if (r.has_shape) {
            w.put('[');
            for (int a = 0; a < r.ndim; ++a) {
                if (a) w.put(',');
                w.put_int(r.shape[static_cast<std::size_t>(a)]);
            }
            w.put(']');
        } else {
            w.put("null");
        }
        w.put(",\"device\":");
        if (r.has_device) {
            w.put('"');
            w.put(::stridex::detail::device_type_text(r.device_type));
            w.put('"');
        } else {
            w.put("null");
        }
        w.put(",\"device_id\":");
        w.put_int(r.device_id);
        w.put(",\"order\":\"");
        w.put(r.order == Contiguity::c ? "C" : r.order == Contiguity::f ? "F" : "any");
        w.put("\",\"may_copy\":");
        put_bool(w, r.may_copy);
        w.put(",\"caller_stream\":");
        put_bool(w, r.caller_stream);
    }
    w.put('}');
}

template <std::size_t N>
struct Text {
    char data[N + 1] = {};
};

}  // namespace detail

// The XLA FFI binding of `Fn` on `P`, one Name per parameter.
template <Platform P, auto Fn, Name... Names>
class Binding {
    using F = detail::Function<decltype(Fn)>;
    using Params = typename F::Params;
    using Return = typename F::Return;
    static constexpr std::size_t kParams = F::arity;
    static_assert(sizeof...(Names) == kParams, "stridex::xla_ffi: give one name per parameter of the function");
    static_assert((detail::is_identifier(Names.text) && ...),
                  "stridex::xla_ffi: parameter names are identifiers (they name XLA attributes)");
    static constexpr bool kReturnsScalar = detail::returns_scalar<Return>();

    template <std::size_t I>
    using ParamAt = detail::Param<std::tuple_element_t<I, Params>>;

    static constexpr const char* names[kParams + 1] = {Names.text..., nullptr};

    template <std::size_t... I>
    static constexpr std::array<detail::Kind, kParams> kinds_of(std::index_sequence<I...>) {
        return {ParamAt<I>::kind...};
    }
    static constexpr std::array<detail::Kind, kParams> kinds = kinds_of(std::make_index_sequence<kParams>{});

    // Where each parameter's operand and result are in the call frame (-1: none).
    struct Slots {
        std::array<int, kParams + 1> operand{}, result{};
        int operands = 0, results = 0, attributes = 0;
        bool legacy_stream = false;  // an array parameter without caller_stream
    };
    template <std::size_t... I>
    static constexpr Slots slots_of(std::index_sequence<I...>) {
        Slots s;
        const Requirements reqs[] = {ParamAt<I>::requirements..., Requirements{}};
        for (std::size_t i = 0; i < kParams; ++i) {
            const detail::Kind k = kinds[i];
            s.operand[i] = (k == detail::Kind::in || k == detail::Kind::inout) ? s.operands++ : -1;
            s.result[i] = (k == detail::Kind::inout || k == detail::Kind::out) ? s.results++ : -1;
            if (k == detail::Kind::attr) ++s.attributes;
            if (k != detail::Kind::attr && !reqs[i].caller_stream) s.legacy_stream = true;
        }
        s.result[kParams] = kReturnsScalar ? s.results++ : -1;
        return s;
    }
    static constexpr Slots slots = slots_of(std::make_index_sequence<kParams>{});

    template <std::size_t... I>
    static constexpr void write_signature(detail::TextWriter& w, std::index_sequence<I...>) {
        w.put("{\"abi\":1,\"platform\":\"");
        w.put(P == Platform::host ? "cpu" : "CUDA");
        w.put("\",\"params\":[");
        std::size_t i = 0;
        ((w.put(i++ ? "," : ""),
          detail::write_param(w, names[I], ParamAt<I>::kind, ParamAt<I>::requirements, ParamAt<I>::dtype)),
         ...);
        w.put("],\"returns\":");
        if constexpr (kReturnsScalar) {
            w.put('"');
            ::stridex::detail::write_dtype(w, dtype_of<Return>());
            w.put('"');
        } else {
            w.put("null");
        }
        w.put('}');
    }
    static constexpr std::size_t kSignatureSize = [] {
        detail::TextWriter w;
        write_signature(w, std::make_index_sequence<kParams>{});
        return w.size;
    }();
    static constexpr detail::Text<kSignatureSize> kSignature = [] {
        detail::Text<kSignatureSize> t;
        detail::TextWriter w{t.data};
        write_signature(w, std::make_index_sequence<kParams>{});
        return t;
    }();

public:
    // The handler XLA calls: register it with jax.ffi.register_ffi_target (stridex.jax.ffi_function
    // does), or through XLA_FFI_REGISTER_HANDLER.
    static XLA_FFI_Error* handler(XLA_FFI_CallFrame* frame);

    // The signature: every parameter's name, kind and constraints, and the return's dtype.
    static constexpr const char* signature = kSignature.data;

    static constexpr StridexXlaTarget target{STRIDEX_XLA_TARGET_ABI, 0, &handler, P == Platform::host ? "cpu" : "CUDA",
                                             kSignature.data};

private:
    // Operands, results and attributes straight from XLA's C call frame (xla/ffi/api/c_api.h): the
    // handler is on the hot path of every call, so nothing is decoded twice or wrapped on the way.
    struct Frame {
        const XLA_FFI_CallFrame* frame;
        Device device;
        std::intptr_t stream;  // XLA's (CUDA), kNoStream on the host
    };

    // An XLA buffer -> View of the platform's device with row-major strides, checked for what a View
    // needs of it (XLA's buffers are well-formed: the rank and extents are what can be wrong).
    static View view_of(const XLA_FFI_Buffer* b, Device device, bool writable, std::size_t i, const char* what) {
        const Dtype dtype = detail::dtype_of_xla(b->dtype);
        if (dtype.bits == 0)
            detail::refuse("parameter ", i, " (", names[i], "): ", what, " has XLA element type ",
                           static_cast<int>(b->dtype), ", which has no stridex dtype");
        if (b->rank < 0 || b->rank > kMaxNdim)
            detail::refuse("parameter ", i, " (", names[i], "): ", what, " has ", b->rank, " axes");
        const auto rank = static_cast<std::size_t>(b->rank);
        std::int64_t strides[kMaxNdim];
        std::int64_t step = 1;
        for (std::size_t a = rank; a-- > 0;) {
            if (b->dims[a] < 0)
                detail::refuse("parameter ", i, " (", names[i], "): ", what, " has extent ", b->dims[a]);
            strides[a] = step;
            step *= b->dims[a] > 1 ? b->dims[a] : 1;
        }
        return View::unchecked(b->data, Layout::unchecked({b->dims, rank}, {strides, rank}), dtype, device,
                               writable ? Writability::writable : Writability::readonly, Owner(), false);
    }

    static const XLA_FFI_Buffer* operand(const Frame& f, std::size_t i, int slot) {
        if (f.frame->args.types[slot] != XLA_FFI_ArgType_BUFFER)
            detail::refuse("parameter ", i, " (", names[i], "): operand ", slot, " is no buffer");
        return static_cast<const XLA_FFI_Buffer*>(f.frame->args.args[slot]);
    }
    static const XLA_FFI_Buffer* result(const Frame& f, std::size_t i, int slot) {
        if (f.frame->rets.types[slot] != XLA_FFI_RetType_BUFFER)
            detail::refuse("parameter ", i, " (", names[i], "): result ", slot, " is no buffer");
        return static_cast<const XLA_FFI_Buffer*>(f.frame->rets.rets[slot]);
    }

    // Where parameter I's attribute is among the attributes sorted by name, as XLA passes them when
    // the call has exactly the parameters' attributes (run() checks the count).
    template <std::size_t I>
    static constexpr std::int64_t attribute_rank() {
        std::int64_t rank = 0;
        const std::string_view name(names[I]);
        for (std::size_t j = 0; j < kParams; ++j)
            if (kinds[j] == detail::Kind::attr && std::string_view(names[j]) < name) ++rank;
        return rank;
    }

    // The attribute of parameter I: where the sorted order puts it, else found by name.
    template <std::size_t I>
    static const XLA_FFI_Scalar* attribute(const Frame& f) {
        constexpr std::string_view name(names[I]);
        const XLA_FFI_Attrs& attrs = f.frame->attrs;
        auto is = [&](std::int64_t k) {
            const XLA_FFI_ByteSpan* key = attrs.names[k];
            return key->len == name.size() && std::memcmp(key->ptr, name.data(), name.size()) == 0;
        };
        std::int64_t k = attribute_rank<I>();
        if (k >= attrs.size || !is(k))
            for (k = 0; k < attrs.size && !is(k); ++k) {
            }
        if (k == attrs.size)
            detail::refuse("parameter ", I, " (", name, "): expected an attribute `", name, "`, found none");
        if (attrs.types[k] != XLA_FFI_AttrType_SCALAR)
            detail::refuse("parameter ", I, " (", name, "): the attribute `", name, "` is no scalar");
        return static_cast<const XLA_FFI_Scalar*>(attrs.attrs[k]);
    }

    template <std::size_t I>
    static auto decode(const Frame& f) {
        using T = std::tuple_element_t<I, Params>;
        constexpr detail::Kind kind = ParamAt<I>::kind;
        if constexpr (kind == detail::Kind::attr) {
            const XLA_FFI_Scalar* scalar = attribute<I>(f);
            const Dtype found = detail::dtype_of_xla(scalar->dtype);
            if (found != dtype_of<T>())
                detail::refuse("parameter ", I, " (", names[I], "): expected an attribute `", names[I], "` of dtype ",
                               dtype_of<T>().name(), ", found ",
                               found.bits ? found.name() : "XLA element type " + std::to_string(scalar->dtype));
            detail::AttrType<T> value;
            std::memcpy(&value, scalar->value, sizeof value);
            return static_cast<T>(value);
        } else {
            static constexpr const Requirements& r = ParamAt<I>::requirements;  // static: not copied per call
            T value(kind == detail::Kind::in
                        ? view_of(operand(f, I, slots.operand[I]), f.device, false, I, "its operand")
                        : view_of(result(f, I, slots.result[I]), f.device, true, I, "its result"));
            View& view = value;
            if (f.stream != kNoStream) view.set_stream(r.caller_stream ? f.stream : kDefaultStream);
            if (!satisfies(r, view)) {
                try {
                    view = conform(r, view);  // the one copy arg::may_copy allows, or the refusal
                } catch (const Error& e) {
                    detail::refuse("parameter ", I, " (", names[I], "): ", e.what());
                }
            }
            if constexpr (kind == detail::Kind::inout) {
                // Read and written: XLA must hand over the operand's buffer as the result's, so that
                // the function reads the operand's values where it writes.
                const XLA_FFI_Buffer* in = operand(f, I, slots.operand[I]);
                if (in->data != view.data() && view.size() != 0)
                    detail::refuse("parameter ", I, " (", names[I], ") is written in place, but its operand ",
                                   slots.operand[I], " and result ", slots.result[I],
                                   " are different buffers: call with input_output_aliases={", slots.operand[I], ": ",
                                   slots.result[I], "}");
            }
            return value;
        }
    }

    // The decoded parameters, each built in place (an aggregate initialised from the decoders'
    // results: no copy) and in order (braced initialisation: the first violation is the one
    // reported), then moved into the call.
    template <std::size_t I, class T>
    struct Slot {
        T value;
    };
    template <class Seq>
    struct Values;
    template <std::size_t... I>
    struct Values<std::index_sequence<I...>> : Slot<I, std::tuple_element_t<I, Params>>... {};
    template <std::size_t I, class V>
    static std::tuple_element_t<I, Params>&& take(V& values) noexcept {
        return std::move(static_cast<Slot<I, std::tuple_element_t<I, Params>>&>(values).value);
    }

    template <std::size_t... I>
    static void call(const Frame& f, std::index_sequence<I...>) {
        Values<std::index_sequence<I...>> values{{decode<I>(f)}...};
        if constexpr (kReturnsScalar) {
            // Checked before the call, as every other result: a refused call has no side effects.
            const View out = view_of(result(f, kParams, slots.result[kParams]), f.device, true, kParams,
                                     "the return value's result");
            if (out.dtype() != dtype_of<Return>() || out.ndim() != 0)
                detail::refuse("the return value is a 0-d ", dtype_of<Return>().name(), " result, found ",
                               view_summary(out));
            Return value = Fn(take<I>(values)...);
            if (f.stream == kNoStream) {
                std::memcpy(out.ptr(), &value, sizeof value);
            } else {
                // Device memory: copied on XLA's stream (the copy engine stages `value` before it
                // returns, so the local may go).
                const View host(&value, 0, Layout(), dtype_of<Return>(), Device::cpu(), Writability::readonly, Owner());
                (void)::stridex::copy(out, host, f.stream);
            }
        } else {
            Fn(take<I>(values)...);
        }
    }

    static XLA_FFI_Error* error(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const std::string& message) noexcept {
        XLA_FFI_Error_Create_Args args;
        args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
        args.extension_start = nullptr;
        args.errc = code;
        args.message = message.c_str();
        return api->XLA_FFI_Error_Create(&args);
    }

    // The refusal of a call whose attributes are not the parameters': the first unexpected one, or
    // the first parameter without one.
    [[noreturn, gnu::cold]] static void unexpected_attribute(const XLA_FFI_Attrs& attrs) {
        for (std::int64_t k = 0; k < attrs.size; ++k) {
            const std::string_view key(attrs.names[k]->ptr, attrs.names[k]->len);
            bool known = false;
            for (std::size_t i = 0; i < kParams; ++i) known |= kinds[i] == detail::Kind::attr && key == names[i];
            if (!known) detail::refuse("unexpected attribute `", key, "`: the attributes are the scalar parameters");
        }
        for (std::size_t i = 0; i < kParams; ++i) {
            bool found = kinds[i] != detail::Kind::attr;
            for (std::int64_t k = 0; k < attrs.size && !found; ++k)
                found = std::string_view(attrs.names[k]->ptr, attrs.names[k]->len) == names[i];
            if (!found)
                detail::refuse("parameter ", i, " (", names[i], "): expected an attribute `", names[i],
                               "`, found none");
        }
        detail::refuse("expected ", slots.attributes, " attributes, found ", attrs.size);  // a name given twice
    }

    // The execute stage's call, once XLA's framing is known to be the common one.
    static XLA_FFI_Error* run(const XLA_FFI_CallFrame* frame) noexcept;
};

template <Platform P, auto Fn, Name... Names>
XLA_FFI_Error* Binding<P, Fn, Names...>::handler(XLA_FFI_CallFrame* frame) {
    // The common frame (this header's struct size, the execute stage, no metadata query) is decoded
    // here; anything else goes to XLA's own binding, which answers the metadata query made at
    // registration and refuses other stages and sizes in XLA's words.
    const bool metadata = frame->extension_start != nullptr &&
                          frame->extension_start->type == XLA_FFI_Extension_Metadata;
    if (frame->struct_size == XLA_FFI_CallFrame_STRUCT_SIZE && frame->stage == XLA_FFI_ExecutionStage_EXECUTE &&
        !metadata) [[likely]]
        return run(frame);
    static auto* const framing = ::xla::ffi::Ffi::Bind()
                                     .To([] {
                                         return ::xla::ffi::Error::Internal(
                                             "stridex XLA handler: a frame XLA's binding takes and stridex does not");
                                     })
                                     .release();
    return framing->Call(frame);
}

template <Platform P, auto Fn, Name... Names>
XLA_FFI_Error* Binding<P, Fn, Names...>::run(const XLA_FFI_CallFrame* frame) noexcept {
    namespace ffi = ::xla::ffi;
    // XLA's stream ordered before the legacy stream for parameters without caller_stream, and
    // ordered back after the function, whatever it did (it may have queued work before throwing).
    struct LegacyOrder {
        Device device;
        std::intptr_t xla_stream = kNoStream;
        void after() {
            const std::intptr_t s = std::exchange(xla_stream, kNoStream);
            if (s != kNoStream) cuda::order(cuda::StreamRef::legacy(), cuda::StreamRef(s), device);
        }
        ~LegacyOrder() {
            try {
                after();
            } catch (...) {  // the call's own error is the one reported
            }
        }
    };
    try {
        Frame f{frame, Device::cpu(), kNoStream};
        if constexpr (P == Platform::cuda) {
            ffi::DiagnosticEngine diagnostic;
            const auto stream = ffi::CtxDecoding<ffi::PlatformStream<void*>>::Decode(frame->api, frame->ctx,
                                                                                     diagnostic);
            const auto ordinal = ffi::CtxDecoding<ffi::DeviceOrdinal>::Decode(frame->api, frame->ctx, diagnostic);
            if (!stream || !ordinal)
                throw detail::Refusal{ffi::ErrorCode::kInternal, "stridex XLA handler: " + diagnostic.Result()};
            // The NULL handle is the legacy default stream; the protocol encoding spells it 1.
            f.stream = *stream ? reinterpret_cast<std::intptr_t>(*stream) : kDefaultStream;
            f.device = Device::cuda(*ordinal);
        }
        if (frame->args.size != slots.operands || frame->rets.size != slots.results)
            detail::refuse("expected ", slots.operands, " operands and ", slots.results, " results, found ",
                           frame->args.size, " and ", frame->rets.size);
        if (frame->attrs.size != slots.attributes) unexpected_attribute(frame->attrs);
        if constexpr (P == Platform::cuda) {
            LegacyOrder legacy{f.device};
            if (slots.legacy_stream) {
                cuda::order(cuda::StreamRef(f.stream), cuda::StreamRef::legacy(), f.device);
                legacy.xla_stream = f.stream;
            }
            call(f, std::make_index_sequence<kParams>{});
            legacy.after();
        } else {
            call(f, std::make_index_sequence<kParams>{});
        }
        return nullptr;
    } catch (const detail::Refusal& r) {
        return error(frame->api, static_cast<XLA_FFI_Error_Code>(r.code), r.message);
    } catch (const Error& e) {
        return error(frame->api,
                     e.kind() == ErrorKind::cuda ? XLA_FFI_Error_Code_INTERNAL : XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     e.what());
    } catch (const std::exception& e) {
        return error(frame->api, XLA_FFI_Error_Code_UNKNOWN, e.what());
    } catch (...) {
        return error(frame->api, XLA_FFI_Error_Code_UNKNOWN,
                     "stridex XLA handler: the function threw a non-std exception");
    }
}

template <auto Fn, Name... Names>
using Host = Binding<Platform::host, Fn, Names...>;
template <auto Fn, Name... Names>
using Cuda = Binding<Platform::cuda, Fn, Names...>;

}  // namespace stridex::xla_ffi
