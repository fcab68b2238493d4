#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "models/layers/layernorm/layernorm_kernels.h"

namespace dp::kernels::cuda {
namespace {

constexpr int64_t kMaxRowBlocks = 65535;
constexpr int64_t kParamChunkRows = 64;  // rows per partial sum of the parameter gradients

// A row's mean and rstd (two passes: the mean, then the squared deviations from it).
template <typename T, typename Part>
__device__ void row_stats(Part&& part, const T* xr, int64_t C, float eps, float& mean, float& rstd) {
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) s += to_f32(xr[c]);
  mean = block_sum(part, s) / static_cast<float>(C);
  float q = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) {
    const float d = to_f32(xr[c]) - mean;
    q += d * d;
  }
  rstd = 1.0f / sqrtf(block_sum(part, q) / static_cast<float>(C) + eps);
}

template <typename T>
__global__ void forward_kernel(T* y, const T* x, const float* w, const float* b, int64_t M, int64_t C, float eps) {
  DP_SHARED(float, part, [kThreads]);
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const T* xr = x + m * C;
    T* yr = y + m * C;
    float mean, rstd;
    row_stats(part, xr, C, eps, mean, rstd);
    for (int64_t c = threadIdx.x; c < C; c += kThreads) {
      const float v = (to_f32(xr[c]) - mean) * rstd * w[c];
      yr[c] = from_f32<T>(b ? v + b[c] : v);
    }
  }
}

// Per row: its statistics into stats, and dx unless null.
template <typename T>
__global__ void backward_rows_kernel(T* dx, const T* dy, const T* x, const float* w, int64_t M, int64_t C, float eps,
                                     float* stats) {
  DP_SHARED(float, part, [kThreads]);
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const T *xr = x + m * C, *gr = dy + m * C;
    float mean, rstd;
    row_stats(part, xr, C, eps, mean, rstd);
    if (threadIdx.x == 0) stats[2 * m] = mean, stats[2 * m + 1] = rstd;
    if (!dx) continue;
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += kThreads) {
      const float g = to_f32(gr[c]) * w[c];
      sg += g;
      sgx += g * ((to_f32(xr[c]) - mean) * rstd);
    }
    const float mg = block_sum(part, sg) / static_cast<float>(C);
    const float mgx = block_sum(part, sgx) / static_cast<float>(C);
    T* dr = dx + m * C;
    for (int64_t c = threadIdx.x; c < C; c += kThreads) {
      const float xhat = (to_f32(xr[c]) - mean) * rstd;
      dr[c] = from_f32<T>(rstd * (to_f32(gr[c]) * w[c] - mg - xhat * mgx));
    }
  }
}

// The parameter gradients in two deterministic stages. Stage 1: thread (c, k) sums column c over
// the rows of chunk k (kParamChunkRows of them, in order) into the partials, w's at [k C + c], b's
// at [(K + k) C + c]; consecutive threads read consecutive columns.
template <typename T>
__global__ void backward_param_chunks_kernel(float* partial, const T* dy, const T* x, int64_t M, int64_t C, int64_t K,
                                             const float* stats) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < C * K; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = t % C, k = t / C;
    const int64_t end = (k + 1) * kParamChunkRows, m1 = end < M ? end : M;
    float sw = 0.0f, sb = 0.0f;
    for (int64_t m = k * kParamChunkRows; m < m1; ++m) {
      const float g = to_f32(dy[m * C + c]);
      sw += g * ((to_f32(x[m * C + c]) - stats[2 * m]) * stats[2 * m + 1]);
      sb += g;
    }
    partial[k * C + c] = sw;
    partial[(K + k) * C + c] = sb;
  }
}

// Stage 2: column c adds its K partials in chunk order: dw += sum dy * xhat, db += sum dy.
__global__ void backward_param_sums_kernel(float* dw, float* db, const float* partial, int64_t C, int64_t K) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < C; c += int64_t(gridDim.x) * blockDim.x) {
    float sw = 0.0f, sb = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      sw += partial[k * C + c];
      sb += partial[(K + k) * C + c];
    }
    dw[c] += sw;
    if (db) db[c] += sb;
  }
}

int64_t param_chunks(int64_t M) { return (M + kParamChunkRows - 1) / kParamChunkRows; }

unsigned row_blocks(int64_t M) { return static_cast<unsigned>(std::min(M, kMaxRowBlocks)); }

}  // namespace

int64_t layernorm_backward_scratch_floats(int64_t M, int64_t C) {
  return M <= 0 || C <= 0 ? 0 : 2 * M + 2 * param_chunks(M) * C;
}

cudaError_t layernorm_forward(DType dtype, void* y, const void* x, const float* w, const float* b, int64_t M,
                              int64_t C, float eps, cudaStream_t stream) {
  if (M < 0 || C < 0 || !(eps > 0.0f)) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (M == 0 || C == 0) return cudaSuccess;
    DP_LAUNCH(forward_kernel<T>, row_blocks(M), kThreads, 0, stream)
    (static_cast<T*>(y), static_cast<const T*>(x), w, b, M, C, eps);
    DP_RETURN_LAUNCH();
  });
}

cudaError_t layernorm_backward(DType dtype, void* dx, float* dw, float* db, const void* dy, const void* x,
                               const float* w, int64_t M, int64_t C, float eps, float* stats, cudaStream_t stream) {
  if (M < 0 || C < 0 || !(eps > 0.0f)) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (M == 0 || C == 0) return cudaSuccess;
    DP_LAUNCH(backward_rows_kernel<T>, row_blocks(M), kThreads, 0, stream)
    (static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), w, M, C, eps, stats);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    const int64_t K = param_chunks(M);
    float* partial = stats + 2 * M;
    DP_LAUNCH(backward_param_chunks_kernel<T>, grid_1d(C * K), kThreads, 0, stream)
    (partial, static_cast<const T*>(dy), static_cast<const T*>(x), M, C, K, stats);
    const cudaError_t e2 = cudaGetLastError();
    if (e2 != cudaSuccess) return e2;
    DP_LAUNCH(backward_param_sums_kernel, grid_1d(C), kThreads, 0, stream)(dw, db, partial, C, K);
    DP_RETURN_LAUNCH();
  });
}

}  // namespace dp::kernels::cuda
