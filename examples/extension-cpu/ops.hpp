// The example's functions, written once and bound twice (nanobind.cpp, pybind11.cpp). Every
// parameter type states what the function needs; the caster checks it before the body runs.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "stridex/python/caster_core.hpp"

namespace example {

using namespace stridex;

// Writes `value` into every element, whatever the strides: needs writable float32 host memory.
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

// Sum of each row of an (n, 3) float64 matrix, in a new host array.
inline Array row_sums(Arg<arg::dtype<double>, arg::shape<arg::any, 3>, arg::cpu> m) {
    const auto in = m.as<const double, 2>();
    Array out = Array::host({m.shape()[0]}, dtypes::float64);
    const auto sums = out.as<double, 1>();
    for (std::int64_t i = 0; i < in.extent(0); ++i) sums(i) = in(i, 0) + in(i, 1) + in(i, 2);
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

// a * x as a new array, returned in the caller's framework (numpy in, numpy out; jax in, jax out).
inline Like scaled(Arg<arg::dtype<float>, arg::cpu> x, float a) {
    Array out = Array::host(x.shape(), dtypes::float32);
    const float* src = reinterpret_cast<const float*>(x.ptr());
    float* dst = reinterpret_cast<float*>(out.ptr());
    if (x.layout().is_c_contiguous()) {
        for (std::int64_t i = 0; i < x.size(); ++i) dst[i] = a * src[i];
    } else {
        fail(ErrorKind::value, "scaled() takes C-contiguous input in this example");
    }
    return like(x, std::move(out));
}

// Only device memory of GPU 0 is accepted: on a CPU machine, every call is the overload error.
inline std::int64_t cuda0_size(Arg<arg::device<DeviceType::kCUDA, 0>> x) { return x.size(); }

// What the function received: (address of element 0, device, read-only, stream or -1).
inline std::tuple<std::uintptr_t, std::string, bool, std::int64_t> info(const View& v) {
    return {reinterpret_cast<std::uintptr_t>(v.ptr()), v.device().name(), v.readonly(),
            static_cast<std::int64_t>(v.stream())};
}

}  // namespace example
