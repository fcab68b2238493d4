#include "models/layers/embedding/embedding_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "models/layers/embedding/table_grad.cuh"

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

// table_grad's rows of a token embedding: dy row m goes onto table row ids[m]. A thread owning
// column d of id range [lo, hi) walks every id in order and takes the rows whose id falls in its
// range (runs of one), so each element gets its rows in m order, as the twin; an id outside
// [0, V) falls in no range and is skipped. The ranges multiply the parallelism beyond D threads
// (GPT-2: 768 columns x 85 ranges) at the cost of each thread reading all M ids, which every
// thread of a warp reads at once (one broadcast load).
struct IdRows {
  const int32_t* __restrict__ ids;
  int64_t M;
  int64_t count() const { return M; }
  template <class F>
  __device__ void runs(int64_t lo, int64_t hi, F&& f) const {
    for (int64_t m = 0; m < M; ++m) {
      const int64_t id = ids[m];
      if (id >= lo && id < hi) f(id, m, 1, 1);
    }
  }
};

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
  return table_grad(dtype, dw, dy, IdRows{ids, M}, V, D, id_ranges(V, D), stream);
}

}  // namespace dp::kernels::cuda
