#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tokens.h"

namespace dp::kernels::cuda {
namespace {

// One thread per (row, position), grid-stride: x[r, t] = w[r, t], y[r, t] = w[r, t + 1].
__global__ void split_windows_kernel(const uint16_t* w, int64_t rows, int64_t T, int32_t* x, int32_t* y) {
  const int64_t n = rows * T;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / T, t = i - r * T;
    const uint16_t* row = w + r * (T + 1);
    x[i] = row[t];
    y[i] = row[t + 1];
  }
}

}  // namespace

cudaError_t split_token_windows(const uint16_t* windows, int64_t rows, int64_t T, int32_t* x, int32_t* y,
                                cudaStream_t stream) {
  if (rows < 0 || T < 1) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  DP_LAUNCH(split_windows_kernel, grid_1d(rows * T), kThreads, 0, stream)(windows, rows, T, x, y);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
