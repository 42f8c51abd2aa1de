// The example's functions, written once and bound three times: nanobind (nanobind.cpp), pybind11
// (pybind11.cpp) and XLA FFI (xla.hpp, for jax.jit). Every parameter type states what the function
// needs; each door checks it before the body runs. Plain C++: no Python here (the one function that
// returns into the caller's framework is in like.hpp, for the Python doors).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "stridex/cuda/arg.hpp"
#include "stridex/cuda/array.hpp"

namespace example {

using namespace stridex;

// Writes `value` into every element, whatever the strides: needs writable float32 host memory.
// Inside jax.jit the array is an operand written in place (aliased to the call's result).
inline void fill(Arg<arg::dtype<float>, arg::cpu, arg::writable> x, float value) {
    View flat = x;
    // Walk any rank by viewing 0-d as one element and peeling axis 0 otherwise.
    struct Walk {
        static void run(const View& v, float value) {
            if (v.ndim() == 0) {
                *reinterpret_cast<float*>(v.ptr()) = value;
                return;
            }
            for (std::int64_t i = 0; i < v.shape()[0]; ++i) run(v.index(0, i), value);
        }
    };
    Walk::run(flat, value);
}

// Sum of each row of an (n, 3) float64 matrix, written into `sums` (n elements): an output
// parameter, which XLA allocates as a result of its own.
inline void row_sums_into(Arg<arg::dtype<double>, arg::shape<arg::any, 3>, arg::cpu> m,
                          Arg<arg::dtype<double>, arg::ndim<1>, arg::cpu, arg::output> sums) {
    if (sums.shape()[0] != m.shape()[0])
        fail(ErrorKind::value, "sums has ", sums.shape()[0], " elements, m ", m.shape()[0], " rows");
    const auto in = m.as<const double, 2>();
    const auto out = sums.as<double, 1>();
    for (std::int64_t i = 0; i < in.extent(0); ++i) out(i) = in(i, 0) + in(i, 1) + in(i, 2);
}

// The same in a new host array (the Python doors return it as a stridex.View).
inline Array row_sums(Arg<arg::dtype<double>, arg::shape<arg::any, 3>, arg::cpu> m) {
    Array out = Array::host({m.shape()[0]}, dtypes::float64);
    row_sums_into(m, Arg<arg::dtype<double>, arg::ndim<1>, arg::cpu, arg::output>(out));
    return out;
}

// Sums of 2-d float32 matrices that must be C- (resp. F-) contiguous: read as one flat block.
inline double flat_total(const View& m) {
    const float* p = reinterpret_cast<const float*>(m.ptr());
    double total = 0;
    for (std::int64_t i = 0; i < m.size(); ++i) total += p[i];
    return total;
}
inline double c_total(Arg<arg::dtype<float>, arg::ndim<2>, arg::cpu, arg::c_contig> m) { return flat_total(m); }
inline double f_total(Arg<arg::dtype<float>, arg::ndim<2>, arg::cpu, arg::f_contig> m) { return flat_total(m); }

// The C-contiguous matrix the function works on: the caller's own memory when it is C-contiguous,
// else a copy (the signature asks for one with may_copy). Returned to show which it got.
inline View as_c_contiguous(Arg<arg::dtype<float>, arg::ndim<2>, arg::c_contig, arg::may_copy> m) { return m; }

// Only device memory of GPU 0 is accepted: on a CPU machine, every call is the overload error.
inline std::int64_t cuda0_size(Arg<arg::device<DeviceType::kCUDA, 0>> x) { return x.size(); }

// The address of element 0 of what the function received: the caller's memory, zero-copy.
inline std::int64_t address_of(const View& v) {
    return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(v.ptr()));
}

// What the function received: (address of element 0, device, read-only, stream or -1).
inline std::tuple<std::uintptr_t, std::string, bool, std::int64_t> info(const View& v) {
    return {reinterpret_cast<std::uintptr_t>(v.ptr()), v.device().name(), v.readonly(),
            static_cast<std::int64_t>(v.stream())};
}

}  // namespace example
