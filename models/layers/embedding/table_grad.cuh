// defines: table_grad, the gradient of a learned table read by rows, which both the token
// embedding (embedding_kernels.cu: row ids[m]) and the position embedding
// (position_embedding_kernels.cu: row m % T) are:
//
//   dw (V, D) += dy[m, :] onto row row(m), for every dy row m (M of them)
//
// deterministically and without atomics: thread (d, r) owns column d of the table rows in range r
// ([r V / R, (r + 1) V / R)), so no two threads touch one element, and it adds each element's dy
// rows in m order onto its running f32 value, the order of both CPU twins (embedding_ref.h,
// position_embedding_ref.h): the same bits. The layers differ only in how a thread finds the dy
// rows of its range, a `Rows` policy:
//
//   struct Rows {
//     int64_t count() const;  // M: dy rows in all (0: nothing to launch)
//     // For the dy rows m whose table row v is in [lo, hi): f(v, m0, step, n) for each run
//     // m = m0, m0 + step, ..., n of them, onto row v; a row's runs in m order.
//     template <class F> __device__ void runs(int64_t lo, int64_t hi, F&& f) const;
//   };
//
// dy in dtype (F32, BF16, F16: raw 16-bit bits, each widened before it is added; another is
// cudaErrorInvalidValue), dw f32. Header for .cu files (C++17).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"

namespace dp::kernels::cuda {

template <typename T, typename Rows>
__global__ void table_grad_kernel(float* __restrict__ dw, const T* __restrict__ dy, Rows rows, int64_t V, int64_t D,
                                  int64_t R) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < D * R; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = t % D, r = t / D;
    rows.runs(r * V / R, (r + 1) * V / R, [&](int64_t v, int64_t m0, int64_t step, int64_t n) {
      float s = dw[v * D + d];  // a run is summed in a register, then stored once
      for (int64_t k = 0; k < n; ++k) s += to_f32(dy[(m0 + k * step) * D + d]);
      dw[v * D + d] = s;
    });
  }
}

// D x R threads. The caller validates the sizes (V, D, R >= 1 where there is work).
template <typename Rows>
cudaError_t table_grad(DType dtype, float* dw, const void* dy, const Rows& rows, int64_t V, int64_t D, int64_t R,
                       cudaStream_t stream) {
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (rows.count() == 0 || D * R == 0) return cudaSuccess;
    DP_LAUNCH(table_grad_kernel<T, Rows>, grid_1d(D * R), kThreads, 0, stream)
    (dw, static_cast<const T*>(dy), rows, V, D, R);
    DP_RETURN_LAUNCH();
  });
}

}  // namespace dp::kernels::cuda
