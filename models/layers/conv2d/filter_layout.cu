#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "models/layers/conv2d/filter_layout.h"
#include "kernels/host_device.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"

namespace dp::kernels::cuda {
namespace {

// One thread per output element (grid-stride). A filter is at most a few million elements
// and is changed once per step, so the strided reads of a plain gather are not worth tiling.

// y (k, rs, c) = x (k, c, rs); i walks y.
template <typename T>
__global__ void kcrs_to_krsc_kernel(T* y, const T* x, int64_t n, int64_t c, int64_t rs) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ci = i % c, t = i / c;
    const int64_t pi = t % rs, ki = t / rs;
    y[i] = x[(ki * c + ci) * rs + pi];
  }
}

// How an element type reads as and is written from f32.
struct F32 {
  using T = float;
  __device__ static float load(T v) { return v; }
  __device__ static T store(float v) { return v; }
};
struct BF16 {
  using T = uint16_t;
  __device__ static float load(T v) { return __bfloat162float(__ushort_as_bfloat16(v)); }
  __device__ static T store(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
};
struct F16 {
  using T = uint16_t;
  __device__ static float load(T v) { return __half2float(__ushort_as_half(v)); }
  __device__ static T store(float v) { return __half_as_ushort(__float2half_rn(v)); }
};

// y (k, c, rs) += x (k, rs, c); i walks y.
template <typename E>
__global__ void krsc_add_to_kcrs_kernel(typename E::T* y, const typename E::T* x, int64_t n, int64_t c, int64_t rs) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pi = i % rs, t = i / rs;
    const int64_t ci = t % c, ki = t / c;
    y[i] = E::store(fp::add(E::load(y[i]), E::load(x[(ki * rs + pi) * c + ci])));
  }
}

template <typename T>
cudaError_t launch_kcrs_to_krsc(T* y, const T* x, int64_t k, int64_t c, int64_t r, int64_t s, cudaStream_t stream) {
  if (k < 0 || c < 0 || r < 0 || s < 0) return cudaErrorInvalidValue;
  const int64_t n = k * c * r * s;
  if (n == 0) return cudaSuccess;
  DP_LAUNCH(kcrs_to_krsc_kernel<T>, grid_1d(n), kThreads, 0, stream)(y, x, n, c, r * s);
  DP_RETURN_LAUNCH();
}

template <typename E>
cudaError_t launch_krsc_add_to_kcrs(typename E::T* y, const typename E::T* x, int64_t k, int64_t c, int64_t r,
                                    int64_t s, cudaStream_t stream) {
  if (k < 0 || c < 0 || r < 0 || s < 0) return cudaErrorInvalidValue;
  const int64_t n = k * c * r * s;
  if (n == 0) return cudaSuccess;
  DP_LAUNCH(krsc_add_to_kcrs_kernel<E>, grid_1d(n), kThreads, 0, stream)(y, x, n, c, r * s);
  DP_RETURN_LAUNCH();
}

}  // namespace

cudaError_t filter_kcrs_to_krsc(float* y, const float* x, int64_t k, int64_t c, int64_t r, int64_t s,
                                cudaStream_t stream) {
  return launch_kcrs_to_krsc(y, x, k, c, r, s, stream);
}
cudaError_t filter_kcrs_to_krsc(uint16_t* y, const uint16_t* x, int64_t k, int64_t c, int64_t r, int64_t s,
                                cudaStream_t stream) {
  return launch_kcrs_to_krsc(y, x, k, c, r, s, stream);
}

cudaError_t filter_krsc_add_to_kcrs_f32(float* y, const float* x, int64_t k, int64_t c, int64_t r, int64_t s,
                                        cudaStream_t stream) {
  return launch_krsc_add_to_kcrs<F32>(y, x, k, c, r, s, stream);
}
cudaError_t filter_krsc_add_to_kcrs_bf16(uint16_t* y, const uint16_t* x, int64_t k, int64_t c, int64_t r, int64_t s,
                                         cudaStream_t stream) {
  return launch_krsc_add_to_kcrs<BF16>(y, x, k, c, r, s, stream);
}
cudaError_t filter_krsc_add_to_kcrs_f16(uint16_t* y, const uint16_t* x, int64_t k, int64_t c, int64_t r, int64_t s,
                                        cudaStream_t stream) {
  return launch_krsc_add_to_kcrs<F16>(y, x, k, c, r, s, stream);
}

}  // namespace dp::kernels::cuda
