// nanobind type casters for stridex, for extension authors:
//
//     #include <stridex/python/nanobind.hpp>
//     using namespace stridex;
//     double total(const View& values);                    // anything stridex.view() takes
//     void saxpy(float a, Arg<arg::dtype<float>, arg::ndim<1>> x,
//                Arg<arg::dtype<float>, arg::ndim<1>, arg::writable> y);
//     Array make(std::int64_t n);                          // -> stridex.View on the memory's device
//     Like scaled(Arg<> x) { return like(x, ...); }         // torch in, torch out
//
// Arguments: a stridex.View always; any other array when nanobind allows implicit conversion
// (the default; nb::arg("x").noconvert() takes stridex.View only). Constraints are checked then;
// an argument that fails them is not converted, and nanobind raises its overload TypeError with
// the constraints as the parameter's type ("stridex.View[dtype=float32, ndim=1, writable]") and
// the type of what was given. The rules live in caster_core.hpp, shared with pybind11.hpp.
// Link the extension with stridex::stridex.
#pragma once

#include <nanobind/nanobind.h>

#include "stridex/python/caster_core.hpp"

NAMESPACE_BEGIN(NB_NAMESPACE)
NAMESPACE_BEGIN(detail)

// Sets the Python error for the exception in flight (nanobind's own, or the shared translation).
inline void stridex_set_error() noexcept {
    try {
        throw;
    } catch (python_error& e) {
        e.restore();
    } catch (...) {
        stridex::interop::set_python_error();
    }
}

template <>
struct type_caster<stridex::View> {
    NB_TYPE_CASTER(stridex::View, const_name("stridex.View"))

    bool from_python(handle src, uint8_t flags, cleanup_list*) noexcept {
        static constexpr stridex::Requirements none{};
        return stridex::interop::import_arg(src.ptr(), flags & static_cast<uint8_t>(cast_flags::convert), none, value);
    }

    static handle from_cpp(const stridex::View& view, rv_policy, cleanup_list*) noexcept {
        try {
            return stridex::interop::export_view(view).release();
        } catch (...) {
            stridex_set_error();
            return handle();
        }
    }
};

// NB_TYPE_CASTER spelt out, so that taking the value can raise a refused copy (import_arg).
template <class... Constraints>
struct type_caster<stridex::Arg<Constraints...>> {
    using Value = stridex::Arg<Constraints...>;
    static constexpr auto Name = const_name(stridex::description<Constraints...>());
    template <typename T_>
    using Cast = movable_cast_t<T_>;
    template <typename T_>
    static constexpr bool can_cast() {
        return true;
    }
    explicit operator Value*() { return &take(); }
    explicit operator Value&() { return take(); }
    explicit operator Value&&() { return std::move(take()); }
    Value value;
    std::string refusal;

    Value& take() {
        if (!refusal.empty()) throw buffer_error(refusal.c_str());
        return value;
    }

    bool from_python(handle src, uint8_t flags, cleanup_list*) noexcept {
        if (!stridex::interop::import_arg(src.ptr(), flags & static_cast<uint8_t>(cast_flags::convert),
                                          Value::requirements, value, &refusal))
            return false;
        value.set_source(src.ptr());
        return true;
    }

    template <typename T_, enable_if_t<std::is_same_v<std::remove_cv_t<T_>, Value>> = 0>
    static handle from_cpp(T_* p, rv_policy policy, cleanup_list* list) noexcept {
        if (!p) return none().release();
        return from_cpp(*p, policy, list);
    }

    static handle from_cpp(const Value& view, rv_policy, cleanup_list*) noexcept {
        try {
            return stridex::interop::export_view(view, view.source()).release();
        } catch (...) {
            stridex_set_error();
            return handle();
        }
    }
};

// Return-only types: an owning Array and a View in the framework of an argument.
template <>
struct type_caster<stridex::Array> {
    NB_TYPE_CASTER(stridex::Array, const_name("stridex.View"))

    bool from_python(handle, uint8_t, cleanup_list*) noexcept { return false; }  // Arrays are made in C++

    static handle from_cpp(const stridex::Array& array, rv_policy, cleanup_list*) noexcept {
        return type_caster<stridex::View>::from_cpp(array, rv_policy::automatic, nullptr);
    }
};

template <>
struct type_caster<stridex::Like> {
    NB_TYPE_CASTER(stridex::Like, const_name("object"))

    bool from_python(handle, uint8_t, cleanup_list*) noexcept { return false; }

    static handle from_cpp(const stridex::Like& out, rv_policy, cleanup_list*) noexcept {
        try {
            return stridex::interop::export_view(out.view, out.like).release();
        } catch (...) {
            stridex_set_error();
            return handle();
        }
    }
};

NAMESPACE_END(detail)
NAMESPACE_END(NB_NAMESPACE)

namespace stridex {

// Makes a stridex::Error thrown by a bound function the matching Python exception (ValueError,
// TypeError, BufferError, IndexError, RuntimeError) instead of nanobind's generic RuntimeError.
// Call once in NB_MODULE.
inline void register_error_translator() {
    nanobind::register_exception_translator(
        [](const std::exception_ptr& p, void*) {
            try {
                std::rethrow_exception(p);
            } catch (const Error&) {
                interop::set_python_error();
            }
        },
        nullptr);
}

}  // namespace stridex
