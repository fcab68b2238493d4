#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "models/layers/global_avgpool/global_avgpool_kernels.h"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/host_device.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/warp_reduce.cuh"

namespace dp::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// NCHW: one warp per plane (NC planes of HW contiguous values); lane l sums l, l + 32, ...,
// then warp_sum's butterfly, whose order depends on nothing but the lane.
template <typename T>
__global__ void forward_nchw_kernel(T* y, const T* x, int64_t NC, int64_t HW) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t p = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32; p < NC; p += warps) {
    const T* plane = x + p * HW;  // (HW)
    float s = 0.0f;
    for (int64_t i = lane; i < HW; i += 32) s = fp::add(s, to_f32(plane[i]));
    s = warp_sum(s);
    if (lane == 0) y[p] = from_f32<T>(fp::div(s, static_cast<float>(HW)));
  }
}

// NHWC: one thread per (n, c), pixels in order; neighbouring threads read neighbouring channels.
template <typename T>
__global__ void forward_nhwc_kernel(T* y, const T* x, int64_t NC, int64_t C, int64_t HW) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < NC; j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = j / C, c = j - n * C;
    const T* p = x + n * HW * C + c;  // (HW) with stride C
    float s = 0.0f;
    for (int64_t i = 0; i < HW; ++i) s = fp::add(s, to_f32(p[i * C]));
    y[j] = from_f32<T>(fp::div(s, static_cast<float>(HW)));
  }
}

// dx element i takes dy of its plane: NCHW plane i / HW; NHWC (n, c) = (i / (HW C), i % C).
template <typename T>
__global__ void backward_kernel(T* dx, const T* dy, int64_t total, int64_t C, int64_t HW, bool nhwc) {
  const float hw = static_cast<float>(HW);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t nc = nhwc ? (i / (HW * C)) * C + i % C : i / HW;
    dx[i] = from_f32<T>(fp::div(to_f32(dy[nc]), hw));
  }
}

}  // namespace

cudaError_t global_avgpool_forward(void* y, const void* x, DType dtype, int64_t N, int64_t C, int64_t HW, bool nhwc,
                                   cudaStream_t stream) {
  if (N < 0 || C < 0 || HW < 1) return cudaErrorInvalidValue;
  const int64_t NC = N * C;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (NC == 0) return cudaSuccess;
    if (nhwc)
      DP_LAUNCH(forward_nhwc_kernel<T>, grid_1d(NC), kThreads, 0, stream)(
          static_cast<T*>(y), static_cast<const T*>(x), NC, C, HW);
    else
      DP_LAUNCH(forward_nchw_kernel<T>, grid_1d(NC, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream)(
          static_cast<T*>(y), static_cast<const T*>(x), NC, HW);
    DP_RETURN_LAUNCH();
  });
}

cudaError_t global_avgpool_backward(void* dx, const void* dy, DType dtype, int64_t N, int64_t C, int64_t HW, bool nhwc,
                                    cudaStream_t stream) {
  if (N < 0 || C < 0 || HW < 1) return cudaErrorInvalidValue;
  const int64_t total = N * C * HW;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (total == 0) return cudaSuccess;
    DP_LAUNCH(backward_kernel<T>, grid_1d(total), kThreads, 0, stream)(
        static_cast<T*>(dx), static_cast<const T*>(dy), total, C, HW, nhwc);
    DP_RETURN_LAUNCH();
  });
}

}  // namespace dp::kernels::cuda
