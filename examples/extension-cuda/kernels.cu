// The example's CUDA kernels. Launch failures become std::runtime_error, which the bindings turn
// into RuntimeError.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels.hpp"

namespace example::kernels {

namespace {

__global__ void saxpy_1d_kernel(std::int64_t n, float a, const float* x, std::int64_t xs, float* y, std::int64_t ys) {
    for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
         i += std::int64_t{gridDim.x} * blockDim.x)
        y[i * ys] = a * x[i * xs] + y[i * ys];
}

__global__ void saxpy_2d_kernel(std::int64_t rows, std::int64_t cols, float a, const float* x, std::int64_t xr,
                                std::int64_t xc, float* y, std::int64_t yr, std::int64_t yc) {
    const std::int64_t n = rows * cols;
    for (std::int64_t k = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; k < n;
         k += std::int64_t{gridDim.x} * blockDim.x) {
        const std::int64_t i = k / cols, j = k % cols;
        y[i * yr + j * yc] = a * x[i * xr + j * xc] + y[i * yr + j * yc];
    }
}

__global__ void arange_kernel(std::int64_t n, float* out) {
    for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
         i += std::int64_t{gridDim.x} * blockDim.x)
        out[i] = static_cast<float>(i);
}

void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// The protocol's stream values are the runtime's own handles: 1 is cudaStreamLegacy, 2
// cudaStreamPerThread, anything else a cudaStream_t (the same object as a CUstream).
cudaStream_t runtime_stream(std::intptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

unsigned blocks_for(std::int64_t n) {
    const std::int64_t blocks = (n + 255) / 256;
    return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);  // grid-stride loops do the rest
}

}  // namespace

void saxpy_1d(int device, std::intptr_t stream, std::int64_t n, float a, const float* x, std::int64_t x_stride,
              float* y, std::int64_t y_stride) {
    if (n == 0) return;
    check(cudaSetDevice(device), "cudaSetDevice");
    saxpy_1d_kernel<<<blocks_for(n), 256, 0, runtime_stream(stream)>>>(n, a, x, x_stride, y, y_stride);
    check(cudaGetLastError(), "saxpy_1d launch");
}

void saxpy_2d(int device, std::intptr_t stream, std::int64_t rows, std::int64_t cols, float a, const float* x,
              std::int64_t x_row_stride, std::int64_t x_col_stride, float* y, std::int64_t y_row_stride,
              std::int64_t y_col_stride) {
    if (rows == 0 || cols == 0) return;
    check(cudaSetDevice(device), "cudaSetDevice");
    saxpy_2d_kernel<<<blocks_for(rows * cols), 256, 0, runtime_stream(stream)>>>(rows, cols, a, x, x_row_stride,
                                                                                 x_col_stride, y, y_row_stride,
                                                                                 y_col_stride);
    check(cudaGetLastError(), "saxpy_2d launch");
}

void arange(int device, std::intptr_t stream, std::int64_t n, float* out) {
    if (n == 0) return;
    check(cudaSetDevice(device), "cudaSetDevice");
    arange_kernel<<<blocks_for(n), 256, 0, runtime_stream(stream)>>>(n, out);
    check(cudaGetLastError(), "arange launch");
}

}  // namespace example::kernels
