// XLA FFI handlers generated from stridex signatures: the function an extension binds with nanobind
// or pybind11 (stridex::Arg parameters, include/stridex/arg.hpp) called inside jax.jit.
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
#include <exception>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xla/ffi/api/ffi.h"

#include "stridex/arg.hpp"
#include "stridex/constraints.hpp"
#include "stridex/copy.hpp"
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
    std::conditional_t<std::is_signed_v<P>,
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
constexpr Dtype dtype_of_xla(::xla::ffi::DataType t) noexcept {
    using ::xla::ffi::DataType;
    switch (t) {
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
        int operands = 0, results = 0;
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
        ((w.put(i++ ? "," : ""), detail::write_param(w, names[I], ParamAt<I>::kind, ParamAt<I>::requirements,
                                                      ParamAt<I>::dtype)),
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

    static constexpr StridexXlaTarget target{STRIDEX_XLA_TARGET_ABI, 0, &handler,
                                             P == Platform::host ? "cpu" : "CUDA", kSignature.data};

private:
    // One call, after XLA's binding checked the frame (struct size, metadata queries, stage).
    static ::xla::ffi::Error run(Device device, std::intptr_t xla_stream, ::xla::ffi::RemainingArgs args,
                                 ::xla::ffi::RemainingRets rets, ::xla::ffi::Dictionary attrs) noexcept;

    // Buffer -> View of `device`, C-order strides; what the parameter requires is checked by the caller.
    static View view_of(const ::xla::ffi::AnyBuffer& buffer, Device device, bool writable, std::size_t i,
                        const char* what) {
        const Dtype dtype = detail::dtype_of_xla(buffer.element_type());
        if (dtype.bits == 0)
            detail::refuse("parameter ", i, " (", names[i], "): ", what, " of XLA element type ",
                           static_cast<int>(buffer.element_type()), " has no stridex dtype");
        const auto dims = buffer.dimensions();
        const std::span<const std::int64_t> shape(dims.begin(), dims.size());
        return View(buffer.untyped_data(), 0, Layout::contiguous(shape), dtype, device,
                    writable ? Writability::writable : Writability::readonly, Owner());
    }

    template <std::size_t I>
    static auto decode(Device device, std::intptr_t stream, const ::xla::ffi::RemainingArgs& args,
                       const ::xla::ffi::RemainingRets& rets, const ::xla::ffi::Dictionary& attrs) {
        using T = std::tuple_element_t<I, Params>;
        constexpr detail::Kind kind = ParamAt<I>::kind;
        if constexpr (kind == detail::Kind::attr) {
            using A = detail::AttrType<T>;
            auto value = attrs.get<A>(std::string_view(names[I]));
            if (!value.has_value()) {
                std::string why = value.error().message();
                detail::refuse("parameter ", I, " (", names[I], "): expected an attribute `", names[I], "` of dtype ",
                               dtype_of<T>().name(), ": ", why);
            }
            return static_cast<T>(*value);
        } else {
            constexpr Requirements r = ParamAt<I>::requirements;
            View view;
            if constexpr (kind == detail::Kind::in) {
                view = view_of(buffer(args.get<::xla::ffi::AnyBuffer>(slots.operand[I]), I, "operand"), device, false,
                               I, "its operand");
            } else {
                view = view_of(buffer(rets.get<::xla::ffi::AnyBuffer>(slots.result[I]), I, "result"), device, true, I,
                               "its result");
            }
            view.set_stream(stream == kNoStream ? kNoStream : r.caller_stream ? stream : kDefaultStream);
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
                const View in = view_of(buffer(args.get<::xla::ffi::AnyBuffer>(slots.operand[I]), I, "operand"),
                                        device, false, I, "its operand");
                if (in.ptr() != view.ptr() && in.size() != 0)
                    detail::refuse("parameter ", I, " (", names[I], ") is written in place, but its operand ",
                                   slots.operand[I], " and result ", slots.result[I],
                                   " are different buffers: call with input_output_aliases={", slots.operand[I],
                                   ": ", slots.result[I], "}");
            }
            if constexpr (std::is_same_v<T, View>)
                return view;
            else
                return T(std::move(view));
        }
    }

    // The buffer in an operand's or a result's decoding (a result's wraps it in ffi::Result).
    static ::xla::ffi::AnyBuffer unwrap(::xla::ffi::AnyBuffer b) { return b; }
    static ::xla::ffi::AnyBuffer unwrap(::xla::ffi::Result<::xla::ffi::AnyBuffer> b) { return *b; }
    template <class Decoded>
    static ::xla::ffi::AnyBuffer buffer(Decoded b, std::size_t i, const char* what) {
        if (!b.has_value()) detail::refuse("parameter ", i, " (", names[i], "): its ", what, ": ", b.error().message());
        return unwrap(*b);
    }

    template <std::size_t... I>
    static void call(Device device, std::intptr_t stream, const ::xla::ffi::RemainingArgs& args,
                     const ::xla::ffi::RemainingRets& rets, const ::xla::ffi::Dictionary& attrs,
                     std::index_sequence<I...>) {
        // Braced initialisation: parameters are decoded in order, so the first violation is reported.
        Params values{decode<I>(device, stream, args, rets, attrs)...};
        if constexpr (kReturnsScalar) {
            // Checked before the call, as every other result: a refused call has no side effects.
            auto result = rets.get<::xla::ffi::AnyBuffer>(slots.result[kParams]);
            if (!result.has_value()) detail::refuse("the return value's result: ", result.error().message());
            const View out = view_of(unwrap(*result), device, true, kParams, "the return value's result");
            if (out.dtype() != dtype_of<Return>() || out.ndim() != 0)
                detail::refuse("the return value is a 0-d ", dtype_of<Return>().name(), " result, found ",
                               view_summary(out));
            Return value = Fn(std::move(std::get<I>(values))...);
            if (stream == kNoStream) {
                *reinterpret_cast<Return*>(out.ptr()) = value;
            } else {
                // Device memory: copied on XLA's stream (the copy engine stages `value` before it
                // returns, so the local may go).
                const View host(&value, 0, Layout(), dtype_of<Return>(), Device::cpu(), Writability::readonly, Owner());
                (void)::stridex::copy(out, host, stream);
            }
        } else {
            Fn(std::move(std::get<I>(values))...);
        }
    }
};

template <Platform P, auto Fn, Name... Names>
XLA_FFI_Error* Binding<P, Fn, Names...>::handler(XLA_FFI_CallFrame* frame) {
    namespace ffi = ::xla::ffi;
    // XLA's own binding does the framing (struct sizes, the metadata query at registration, the
    // stage); everything else is decoded here, so that every error names the parameter.
    if constexpr (P == Platform::host) {
        static auto* const bound = ffi::Ffi::Bind()
                                       .RemainingArgs()
                                       .RemainingRets()
                                       .Attrs()
                                       .To([](ffi::RemainingArgs args, ffi::RemainingRets rets, ffi::Dictionary attrs) {
                                           return run(Device::cpu(), kNoStream, args, rets, attrs);
                                       })
                                       .release();
        return bound->Call(frame);
    } else {
        static auto* const bound =
            ffi::Ffi::Bind()
                .Ctx<ffi::PlatformStream<void*>>()
                .Ctx<ffi::DeviceOrdinal>()
                .RemainingArgs()
                .RemainingRets()
                .Attrs()
                .To([](void* stream, std::int32_t ordinal, ffi::RemainingArgs args, ffi::RemainingRets rets,
                       ffi::Dictionary attrs) {
                    // The NULL handle is the legacy default stream; the protocol encoding spells it 1.
                    const std::intptr_t encoded = stream ? reinterpret_cast<std::intptr_t>(stream) : kDefaultStream;
                    return run(Device::cuda(ordinal), encoded, args, rets, attrs);
                })
                .release();
        return bound->Call(frame);
    }
}

template <Platform P, auto Fn, Name... Names>
::xla::ffi::Error Binding<P, Fn, Names...>::run(Device device, std::intptr_t xla_stream,
                                                ::xla::ffi::RemainingArgs args, ::xla::ffi::RemainingRets rets,
                                                ::xla::ffi::Dictionary attrs) noexcept {
    namespace ffi = ::xla::ffi;
    // XLA's stream ordered before the legacy stream for parameters without caller_stream, and
    // ordered back after the function, whatever it did (it may have queued work before throwing).
    struct LegacyOrder {
        Device device;
        std::intptr_t xla_stream = kNoStream;
        void before() {
            cuda::order(cuda::StreamRef(xla_stream), cuda::StreamRef::legacy(), device);
        }
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
    } legacy{device};
    try {
        if (args.size() != static_cast<std::size_t>(slots.operands) ||
            rets.size() != static_cast<std::size_t>(slots.results))
            detail::refuse("expected ", slots.operands, " operands and ", slots.results, " results, found ",
                           args.size(), " and ", rets.size());
        if (xla_stream != kNoStream && slots.legacy_stream) {
            legacy.xla_stream = xla_stream;
            legacy.before();
        }
        call(device, xla_stream, args, rets, attrs, std::make_index_sequence<kParams>{});
        legacy.after();
        return ffi::Error::Success();
    } catch (detail::Refusal& r) {
        return ffi::Error(r.code, std::move(r.message));
    } catch (const Error& e) {
        return ffi::Error(e.kind() == ErrorKind::cuda ? ffi::ErrorCode::kInternal : ffi::ErrorCode::kInvalidArgument,
                          e.what());
    } catch (const std::exception& e) {
        return ffi::Error(ffi::ErrorCode::kUnknown, e.what());
    } catch (...) {
        return ffi::Error(ffi::ErrorCode::kUnknown, "stridex XLA handler: the function threw a non-std exception");
    }
}

template <auto Fn, Name... Names>
using Host = Binding<Platform::host, Fn, Names...>;
template <auto Fn, Name... Names>
using Cuda = Binding<Platform::cuda, Fn, Names...>;

}  // namespace stridex::xla_ffi
