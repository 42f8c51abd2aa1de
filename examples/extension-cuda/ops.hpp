// The CUDA example's functions, written once and bound three times: nanobind (nanobind.cpp),
// pybind11 (pybind11.cpp) and XLA FFI (xla.hpp, for jax.jit). Plain C++: no Python here (the one
// function that returns into the caller's framework is in like.hpp, for the Python doors).
//
// Streams: every array parameter says arg::caller_stream, so each argument arrives ordered on the
// stream the calling framework is working on (torch.cuda.current_stream() for torch tensors, via
// torch's DLPack exchange API; the legacy default stream for frameworks without one), and
// View::stream() is that stream. The kernels are queued there: no host synchronization, and the
// caller's next operation on its stream sees the result. Inside jax.jit that stream is XLA's own.
#pragma once

#include <cstdint>

#include "kernels.hpp"
#include "stridex/cuda/arg.hpp"
#include "stridex/cuda/array.hpp"
#include "stridex/cuda/stream.hpp"

namespace example {

using namespace stridex;

template <int Rank>
using In = Arg<arg::dtype<float>, arg::ndim<Rank>, arg::cuda, arg::caller_stream>;
template <int Rank>
using InOut = Arg<arg::dtype<float>, arg::ndim<Rank>, arg::cuda, arg::writable, arg::caller_stream>;

// Where to launch for y: its stream, after x's data is ready there too (x may come from another
// framework, ready on another stream: one event, no host block).
inline std::intptr_t launch_stream(const View& x, const View& y) {
    if (x.device() != y.device())
        fail(ErrorKind::value, "x is on ", x.device().name(), " but y on ", y.device().name());
    if (x.stream() != y.stream()) cuda::order(cuda::StreamRef(x.stream()), cuda::StreamRef(y.stream()), y.device());
    return y.stream();
}

inline void require_same_shape(const View& x, const View& y) {
    for (int a = 0; a < x.ndim(); ++a)
        if (x.shape()[static_cast<std::size_t>(a)] != y.shape()[static_cast<std::size_t>(a)])
            fail(ErrorKind::value, "x and y differ in shape along axis ", a, ": ",
                 x.shape()[static_cast<std::size_t>(a)], " and ", y.shape()[static_cast<std::size_t>(a)]);
}

// y = a * x + y, in place, on 1-d views with any strides.
inline void saxpy(float a, In<1> x, InOut<1> y) {
    require_same_shape(x, y);
    const std::intptr_t stream = launch_stream(x, y);
    kernels::saxpy_1d(y.device().id, stream, y.shape()[0], a, x.as<const float, 1>().data(), x.strides()[0],
                      y.as<float, 1>().data(), y.strides()[0]);
}

// The same on 2-d views: transposed, sliced, reversed -- the kernel takes the strides as they are.
inline void saxpy_2d(float a, In<2> x, InOut<2> y) {
    require_same_shape(x, y);
    const std::intptr_t stream = launch_stream(x, y);
    kernels::saxpy_2d(y.device().id, stream, y.shape()[0], y.shape()[1], a, x.as<const float, 2>().data(),
                      x.strides()[0], x.strides()[1], y.as<float, 2>().data(), y.strides()[0], y.strides()[1]);
}

// 0, 1, ..., n-1 in new device memory of GPU `device`, returned as a stridex.View on cuda:<device>
// (the memory's own device) that is still being written on the legacy default stream: the View
// says so, and whoever imports it orders its own stream after that.
inline Array arange(std::int64_t n, int device) {
    if (n < 0) fail(ErrorKind::value, "n must be >= 0, found ", n);
    Array out = Array::cuda({n}, dtypes::float32, device);
    kernels::arange(device, cuda::StreamRef::kLegacy, n, out.as<float, 1>().data());
    out.set_stream(cuda::StreamRef::kLegacy);
    return out;
}

// 0, 1, ..., n-1 into `out`, every element and never read (an output), launched on out.stream():
// without caller_stream that is the legacy default stream, through every door. Inside jax.jit the
// handler orders XLA's stream before the legacy stream, and the legacy stream before XLA's again
// after the call, so XLA's next operation sees the values.
inline void arange_into(Arg<arg::dtype<float>, arg::ndim<1>, arg::cuda, arg::c_contig, arg::output> out) {
    kernels::arange(out.device().id, out.stream(), out.shape()[0], out.as<float, 1>().data());
}

// The stream a caller_stream argument arrived on (to see the contract at work).
inline std::int64_t stream_of(Arg<arg::cuda, arg::caller_stream> x) { return static_cast<std::int64_t>(x.stream()); }

}  // namespace example
