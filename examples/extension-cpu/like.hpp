// The example's one function for the Python doors only: its result comes back in the caller's own
// framework (numpy in, numpy out; jax in, jax out) through like(), which needs the Python object
// the argument came from. Inside jax.jit a result is always XLA's array, so xla.hpp has no twin.
#pragma once

#include "ops.hpp"
#include "stridex/python/caster_core.hpp"

namespace example {

// a * x as a new array, returned in the caller's framework.
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

}  // namespace example
