// The kernels' host launchers (kernels.cu, compiled by nvcc), on plain pointers, element strides and
// a stream in the protocol encoding (1 legacy default stream, 2 per-thread, else a CUstream): the
// binding code (ops.hpp) is ordinary C++ and needs no CUDA headers.
#pragma once

#include <cstdint>

namespace example::kernels {

// y[i * y_stride] = a * x[i * x_stride] + y[i * y_stride] for i < n, on `device`, queued on `stream`.
void saxpy_1d(int device, std::intptr_t stream, std::int64_t n, float a, const float* x, std::int64_t x_stride,
              float* y, std::int64_t y_stride);
// The same over a rows x cols matrix with any element strides (negative and zero included).
void saxpy_2d(int device, std::intptr_t stream, std::int64_t rows, std::int64_t cols, float a, const float* x,
              std::int64_t x_row_stride, std::int64_t x_col_stride, float* y, std::int64_t y_row_stride,
              std::int64_t y_col_stride);
// out[i] = i for i < n.
void arange(int device, std::intptr_t stream, std::int64_t n, float* out);

}  // namespace example::kernels
