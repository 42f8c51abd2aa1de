// The example's one function for the Python doors only: its result comes back in the caller's own
// framework (torch in, torch out) through like(), which needs the Python object the argument came
// from. Inside jax.jit a result is always XLA's array, so xla.hpp has no twin.
#pragma once

#include "ops.hpp"
#include "stridex/python/caster_core.hpp"

namespace example {

// The same, on the device and stream of `like`, returned in like's framework (torch in, torch out).
inline Like arange_like(Arg<arg::cuda, arg::caller_stream> like_this, std::int64_t n) {
    if (n < 0) fail(ErrorKind::value, "n must be >= 0, found ", n);
    Array out = Array::cuda({n}, dtypes::float32, like_this.device().id);
    kernels::arange(like_this.device().id, like_this.stream(), n, out.as<float, 1>().data());
    out.set_stream(like_this.stream());
    return like(like_this, std::move(out));
}

}  // namespace example
