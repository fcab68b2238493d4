#include "models/layers/embedding/embedding_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

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

// Thread (d, r) owns column d of the table rows in id range r (ids [r V / R, (r + 1) V / R)): it
// walks every id in order and adds the rows whose id falls in its range, so each dw element gets
// its rows in m order, as the twin, and no two threads touch one element. The ranges multiply the
// parallelism beyond D threads (GPT-2: 768 columns x 85 ranges) at the cost of each thread reading
// all M ids, which every thread of a warp reads at once (one broadcast load).
template <typename T>
__global__ void embedding_backward_kernel(float* __restrict__ dw, const int32_t* __restrict__ ids,
                                          const T* __restrict__ dy, int64_t M, int64_t V, int64_t D, int64_t R) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < D * R; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = t % D, r = t / D;
    const int64_t lo = r * V / R, hi = (r + 1) * V / R;
    for (int64_t m = 0; m < M; ++m) {
      const int64_t id = ids[m];
      if (id >= lo && id < hi) dw[id * D + d] += to_f32(dy[m * D + d]);
    }
  }
}

// Id ranges per column: about 64 Ki threads in all, at most one range per table row.
int64_t id_ranges(int64_t V, int64_t D) { return std::max<int64_t>(1, std::min<int64_t>(V, 65536 / D)); }

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
    const int64_t R = id_ranges(V, D);
    DP_LAUNCH(embedding_backward_kernel<T>, grid_1d(D * R), kThreads, 0, stream)
    (dw, ids, static_cast<const T*>(dy), M, V, D, R);
    DP_RETURN_LAUNCH();
  });
}

}  // namespace dp::kernels::cuda
