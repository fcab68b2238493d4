#include "kernels/cuda/elementwise.h"

#include "kernels/cuda/host_device.h"
#include "kernels/cuda/launch.cuh"

namespace dp::kernels::cuda {
namespace {

__global__ void relu_forward_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

__global__ void relu_backward_kernel(float* dx, const float* dy, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void add_kernel(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fp::add(a[i], b[i]);
}

__global__ void scale_kernel(float* y, const float* x, float alpha, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fp::mul(alpha, x[i]);
}

__global__ void divide_kernel(float* x, int64_t n, float divisor) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = fp::div(x[i], divisor);
}

// One element per thread over the whole (outer, channels, inner) block; the channel is
// (i / inner) % channels.
__global__ void bias_add_kernel(float* y, const float* b, int64_t total, int64_t channels, int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fp::add(y[i], b[(i / inner) % channels]);
}

}  // namespace

cudaError_t relu_forward(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  relu_forward_kernel<<<grid_1d(n), kThreads, 0, stream>>>(y, x, n);
  DP_RETURN_LAUNCH();
}

cudaError_t relu_backward(float* dx, const float* dy, const float* y, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  relu_backward_kernel<<<grid_1d(n), kThreads, 0, stream>>>(dx, dy, y, n);
  DP_RETURN_LAUNCH();
}

cudaError_t add(float* y, const float* a, const float* b, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  add_kernel<<<grid_1d(n), kThreads, 0, stream>>>(y, a, b, n);
  DP_RETURN_LAUNCH();
}

cudaError_t add_inplace(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  return add(dst, dst, src, n, stream);
}

cudaError_t scale(float* y, const float* x, float alpha, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  scale_kernel<<<grid_1d(n), kThreads, 0, stream>>>(y, x, alpha, n);
  DP_RETURN_LAUNCH();
}

cudaError_t divide(float* x, int64_t n, int divisor, cudaStream_t stream) {
  if (n < 0 || divisor == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  divide_kernel<<<grid_1d(n), kThreads, 0, stream>>>(x, n, static_cast<float>(divisor));
  DP_RETURN_LAUNCH();
}

cudaError_t bias_add(float* y, const float* b, int64_t outer, int64_t channels, int64_t inner, cudaStream_t stream) {
  if (outer < 0 || channels < 0 || inner < 0) return cudaErrorInvalidValue;
  const int64_t total = outer * channels * inner;
  if (total == 0) return cudaSuccess;
  bias_add_kernel<<<grid_1d(total), kThreads, 0, stream>>>(y, b, total, channels, inner);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
