#include "models/layers/embedding/embedding_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"

namespace dp::kernels::cuda {
namespace {

template <typename T>
__global__ void embedding_forward_kernel(T* y, const int32_t* ids, const float* w, int64_t M, int64_t V, int64_t D) {
  const int64_t n = M * D;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / D, d = i % D;
    const int64_t id = ids[m];
    y[i] = from_f32<T>(id >= 0 && id < V ? w[id * D + d] : NAN);
  }
}

// Thread d owns column d of dw: the rows in order, as the twin.
template <typename T>
__global__ void embedding_backward_kernel(float* dw, const int32_t* ids, const T* dy, int64_t M, int64_t V,
                                          int64_t D) {
  for (int64_t d = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; d < D; d += int64_t(gridDim.x) * blockDim.x)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t id = ids[m];
      if (id >= 0 && id < V) dw[id * D + d] += to_f32(dy[m * D + d]);
    }
}

}  // namespace

cudaError_t embedding_forward(DType dtype, void* y, const int32_t* ids, const float* w, int64_t M, int64_t V,
                              int64_t D, cudaStream_t stream) {
  if (M < 0 || V < 1 || D < 1) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (M == 0) return cudaSuccess;
    DP_LAUNCH(embedding_forward_kernel<T>, grid_1d(M * D), kThreads, 0, stream)
    (static_cast<T*>(y), ids, w, M, V, D);
    DP_RETURN_LAUNCH();
  });
}

cudaError_t embedding_backward(DType dtype, float* dw, const int32_t* ids, const void* dy, int64_t M, int64_t V,
                               int64_t D, cudaStream_t stream) {
  if (M < 0 || V < 1 || D < 1) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (M == 0) return cudaSuccess;
    DP_LAUNCH(embedding_backward_kernel<T>, grid_1d(D), kThreads, 0, stream)
    (dw, ids, static_cast<const T*>(dy), M, V, D);
    DP_RETURN_LAUNCH();
  });
}

}  // namespace dp::kernels::cuda
