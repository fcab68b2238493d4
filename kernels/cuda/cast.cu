#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cast.h"
#include "kernels/host_device.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"

namespace dp::kernels::cuda {
namespace {

#define DP_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void f32_to_bf16_kernel(uint16_t* y, const float* x, int64_t n) {
  DP_GRID_STRIDE(i, n) y[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}
__global__ void bf16_to_f32_kernel(float* y, const uint16_t* x, int64_t n) {
  DP_GRID_STRIDE(i, n) y[i] = __bfloat162float(__ushort_as_bfloat16(x[i]));
}
__global__ void f32_to_f16_kernel(uint16_t* y, const float* x, int64_t n) {
  DP_GRID_STRIDE(i, n) y[i] = __half_as_ushort(__float2half_rn(x[i]));
}
__global__ void f16_to_f32_kernel(float* y, const uint16_t* x, int64_t n) {
  DP_GRID_STRIDE(i, n) y[i] = __half2float(__ushort_as_half(x[i]));
}

// One flag write per thread that saw a non-finite value: benign races, all write 1.
__global__ void unscale_f16_kernel(float* y, const uint16_t* x, int64_t n, float inv_scale, float* found_inf) {
  bool bad = false;
  DP_GRID_STRIDE(i, n) {
    const float v = __half2float(__ushort_as_half(x[i]));
    bad |= !isfinite(v);
    y[i] = fp::mul(v, inv_scale);
  }
  if (bad) *found_inf = 1.0f;
}
__global__ void unscale_f32_kernel(float* g, int64_t n, float inv_scale, float* found_inf) {
  bool bad = false;
  DP_GRID_STRIDE(i, n) {
    const float v = g[i];
    bad |= !isfinite(v);
    g[i] = fp::mul(v, inv_scale);
  }
  if (bad) *found_inf = 1.0f;
}

#undef DP_GRID_STRIDE

}  // namespace

#define DP_LAUNCH_1D(kernel, n, ...)                                 \
  do {                                                               \
    if ((n) < 0) return cudaErrorInvalidValue;                       \
    if ((n) == 0) return cudaSuccess;                                \
    DP_LAUNCH(kernel, grid_1d(n), kThreads, 0, stream)(__VA_ARGS__); \
    DP_RETURN_LAUNCH();                                              \
  } while (0)

cudaError_t f32_to_bf16(uint16_t* y, const float* x, int64_t n, cudaStream_t stream) {
  DP_LAUNCH_1D(f32_to_bf16_kernel, n, y, x, n);
}
cudaError_t bf16_to_f32(float* y, const uint16_t* x, int64_t n, cudaStream_t stream) {
  DP_LAUNCH_1D(bf16_to_f32_kernel, n, y, x, n);
}
cudaError_t f32_to_f16(uint16_t* y, const float* x, int64_t n, cudaStream_t stream) {
  DP_LAUNCH_1D(f32_to_f16_kernel, n, y, x, n);
}
cudaError_t f16_to_f32(float* y, const uint16_t* x, int64_t n, cudaStream_t stream) {
  DP_LAUNCH_1D(f16_to_f32_kernel, n, y, x, n);
}
cudaError_t unscale_f16_to_f32(float* y, const uint16_t* x, int64_t n, float inv_scale, float* found_inf,
                               cudaStream_t stream) {
  DP_LAUNCH_1D(unscale_f16_kernel, n, y, x, n, inv_scale, found_inf);
}
cudaError_t unscale_f32(float* g, int64_t n, float inv_scale, float* found_inf, cudaStream_t stream) {
  DP_LAUNCH_1D(unscale_f32_kernel, n, g, n, inv_scale, found_inf);
}

#undef DP_LAUNCH_1D

}  // namespace dp::kernels::cuda
