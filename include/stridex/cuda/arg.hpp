// stridex::Arg<constraints...>: an array parameter with typed constraints, for every door a
// function is called through -- the nanobind and pybind11 casters (include/stridex/python/) and the
// XLA FFI handler (include/stridex/xla/ffi.hpp). One signature, written once:
//
//     void saxpy(float a, Arg<arg::dtype<float>, arg::ndim<1>, arg::cuda, arg::caller_stream> x,
//                Arg<arg::dtype<float>, arg::ndim<1>, arg::cuda, arg::writable, arg::caller_stream> y);
//
// Each door builds the View, checks it against `requirements` (constraints.hpp) and calls the
// function. This header needs no Python: an Arg carries the Python object it came from as CPython's
// `struct _object*` (Python.h's PyObject), declared here, so that the XLA door, which has no
// Python, takes the same types.
#pragma once

#include <utility>

#include "stridex/cuda/constraints.hpp"
#include "stridex/view.hpp"

struct _object;  // CPython's PyObject (Python.h: typedef struct _object PyObject)

namespace stridex {

// A View argument that remembers the Python object it came from (for like()); null where the
// argument came through another door (XLA FFI, plain C++).
class ArgBase : public View {
public:
    ArgBase() = default;
    explicit ArgBase(View view, _object* source = nullptr) : View(std::move(view)), source_(source) {}
    // The object the caller passed: borrowed, valid during the call only.
    _object* source() const noexcept { return source_; }
    // For the casters, which import into the argument in place (import_arg) and then say from what.
    void set_source(_object* source) noexcept { source_ = source; }

private:
    _object* source_ = nullptr;
};

// An array argument with typed constraints: Arg<arg::dtype<float>, arg::ndim<2>, arg::cuda>.
// Converting an argument that does not meet them fails: the binding libraries raise their overload
// TypeError, which shows the constraints as the parameter's type; the XLA handler returns an error
// naming the parameter.
template <class... Constraints>
class Arg : public ArgBase {
public:
    static constexpr Requirements requirements = requirements_of<Constraints...>();
    using ArgBase::ArgBase;
};

}  // namespace stridex
