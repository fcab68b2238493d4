#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "models/layers/embedding/table_grad.cuh"
#include "models/layers/position_embedding/position_embedding_kernels.h"

namespace dp::kernels::cuda {
namespace {

template <typename T>
__global__ void forward_kernel(T* y, const T* x, const float* w, int64_t N, int64_t TC) {
  const int64_t n_all = N * TC;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n_all; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(to_f32(x[i]) + w[i % TC]);
}

// table_grad's rows of a position embedding: dy (N, Tn, C) as N Tn rows, row n Tn + t onto table
// row t. With one table row per range (R = Tn: Tn C threads), a thread's rows are one run down the
// batch, n in order: the twin's sums exactly.
struct PositionRows {
  int64_t N, Tn;
  int64_t count() const { return N * Tn; }
  template <class F>
  __device__ void runs(int64_t lo, int64_t hi, F&& f) const {
    for (int64_t t = lo; t < hi; ++t) f(t, t, Tn, N);
  }
};

}  // namespace

cudaError_t position_embedding_forward(DType dtype, void* y, const void* x, const float* w, int64_t N, int64_t Tn,
                                       int64_t C, cudaStream_t stream) {
  if (N < 0 || Tn < 0 || C < 0) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (N == 0 || Tn == 0 || C == 0) return cudaSuccess;
    DP_LAUNCH(forward_kernel<T>, grid_1d(N * Tn * C), kThreads, 0, stream)
    (static_cast<T*>(y), static_cast<const T*>(x), w, N, Tn * C);
    DP_RETURN_LAUNCH();
  });
}

cudaError_t position_embedding_backward(DType dtype, float* dw, const void* dy, int64_t N, int64_t Tn, int64_t C,
                                        cudaStream_t stream) {
  if (N < 0 || Tn < 0 || C < 0) return cudaErrorInvalidValue;
  return table_grad(dtype, dw, dy, PositionRows{N, Tn}, Tn, C, Tn, stream);
}

}  // namespace dp::kernels::cuda
