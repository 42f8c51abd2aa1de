// pybind11 type casters for stridex, for extension authors: the same types and rules as
// <stridex/python/nanobind.hpp> (see there and caster_core.hpp, which both share):
//
//     #include <stridex/python/pybind11.hpp>
//     using namespace stridex;
//     void saxpy(float a, Arg<arg::dtype<float>, arg::ndim<1>> x,
//                Arg<arg::dtype<float>, arg::ndim<1>, arg::writable> y);
//     Array make(std::int64_t n);
//
// Arguments: a stridex.View always; any other array stridex.view() accepts when pybind11 allows
// conversion (the default; py::arg("x").noconvert() takes stridex.View only). An argument that
// fails its constraints is not converted, and pybind11 raises its overload TypeError showing the
// constraints as the parameter's type and the repr of what was given.
// Link the extension with stridex::stridex.
#pragma once

#include <pybind11/pybind11.h>

#include "stridex/python/caster_core.hpp"

PYBIND11_NAMESPACE_BEGIN(PYBIND11_NAMESPACE)
PYBIND11_NAMESPACE_BEGIN(detail)

// Sets the Python error for the exception in flight (pybind11's own, or the shared translation).
inline void stridex_set_error() noexcept {
    try {
        throw;
    } catch (error_already_set& e) {
        e.restore();
    } catch (...) {
        stridex::interop::set_python_error();
    }
}

// A Python object from an export, or the pending error raised as error_already_set (pybind11's
// cast() reports failure by exception).
template <class Export>
handle stridex_export(Export&& make) {
    try {
        return make().release();
    } catch (...) {
        stridex_set_error();
    }
    throw error_already_set();
}

template <>
struct type_caster<stridex::View> {
    PYBIND11_TYPE_CASTER(stridex::View, const_name("stridex.View"));

    bool load(handle src, bool convert) {
        static constexpr stridex::Requirements none{};
        return stridex::interop::import_arg(src.ptr(), convert, none, value);
    }

    static handle cast(const stridex::View& view, return_value_policy, handle) {
        return stridex_export([&] { return stridex::interop::export_view(view); });
    }
};

// PYBIND11_TYPE_CASTER spelt out, so that taking the value can raise a refused copy (import_arg).
template <class... Constraints>
struct type_caster<stridex::Arg<Constraints...>> {
    using ArgType = stridex::Arg<Constraints...>;
    static constexpr auto name = const_name(stridex::description<Constraints...>());
    operator ArgType*() { return &take(); }
    operator ArgType&() { return take(); }
    operator ArgType&&() && { return std::move(take()); }
    template <typename T_>
    using cast_op_type = movable_cast_op_type<T_>;

    bool load(handle src, bool convert) {
        if (!stridex::interop::import_arg(src.ptr(), convert, ArgType::requirements, value, &refusal)) return false;
        value.set_source(src.ptr());
        return true;
    }

protected:
    ArgType value;
    std::string refusal;

    ArgType& take() {
        if (!refusal.empty()) throw buffer_error(refusal);
        return value;
    }

public:
    static handle cast(const ArgType& view, return_value_policy, handle) {
        return stridex_export([&] { return stridex::interop::export_view(view, view.source()); });
    }
};

// Return-only types: an owning Array and a View in the framework of an argument.
template <>
struct type_caster<stridex::Array> {
    PYBIND11_TYPE_CASTER(stridex::Array, const_name("stridex.View"));

    bool load(handle, bool) { return false; }  // Arrays are made in C++

    static handle cast(const stridex::Array& array, return_value_policy, handle) {
        return stridex_export([&] { return stridex::interop::export_view(array); });
    }
};

template <>
struct type_caster<stridex::Like> {
    PYBIND11_TYPE_CASTER(stridex::Like, const_name("object"));

    bool load(handle, bool) { return false; }

    static handle cast(const stridex::Like& out, return_value_policy, handle) {
        return stridex_export([&] { return stridex::interop::export_view(out.view, out.like); });
    }
};

PYBIND11_NAMESPACE_END(detail)
PYBIND11_NAMESPACE_END(PYBIND11_NAMESPACE)

namespace stridex {

// Makes a stridex::Error thrown by a bound function the matching Python exception (ValueError,
// TypeError, BufferError, IndexError, RuntimeError) instead of pybind11's generic RuntimeError.
// Call once in PYBIND11_MODULE.
inline void register_error_translator() {
    pybind11::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const Error&) {
            interop::set_python_error();
        }
    });
}

}  // namespace stridex
