#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/accumulate.h"
#include "kernels/host_device.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"

namespace dp::kernels::cuda {
namespace {

__device__ __forceinline__ float widen(uint16_t v, bool bf16) {
  return bf16 ? __bfloat162float(__ushort_as_bfloat16(v)) : __half2float(__ushort_as_half(v));
}
__device__ __forceinline__ uint16_t narrow(float v, bool bf16) {
  return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
}

__global__ void widen_accumulate_kernel(float* y, const uint16_t* x, int64_t n, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fp::add(y[i], widen(x[i], bf16));
}

__global__ void add_inplace_16_kernel(uint16_t* dst, const uint16_t* src, int64_t n, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = narrow(fp::add(widen(dst[i], bf16), widen(src[i], bf16)), bf16);
}

}  // namespace

cudaError_t widen_accumulate(float* y, const uint16_t* x, int64_t n, bool bf16, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (y == nullptr || x == nullptr))) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  DP_LAUNCH(widen_accumulate_kernel, grid_1d(n), kThreads, 0, stream)(y, x, n, bf16);
  DP_RETURN_LAUNCH();
}

cudaError_t add_inplace_16(uint16_t* dst, const uint16_t* src, int64_t n, bool bf16, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (dst == nullptr || src == nullptr))) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  DP_LAUNCH(add_inplace_16_kernel, grid_1d(n), kThreads, 0, stream)(dst, src, n, bf16);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
