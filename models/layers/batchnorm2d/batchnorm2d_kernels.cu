#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "models/layers/batchnorm2d/batchnorm2d_kernels.h"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/shared_memory.cuh"

namespace dp::kernels::cuda {
namespace {

constexpr int kSumThreads = 256;             // NCHW sums: one block of 256 per (channel, chunk)
constexpr int kTileC = 32, kTileRows = 8;    // NHWC sums: 32 channels x 8 rows per block
constexpr int64_t kMaxSumBlocks = 1024;      // stage-1 blocks: enough for 132 SMs, few partials
constexpr int64_t kMinChunk = 4096;          // values per block at least (unless M is smaller)

// Channel of element i of a (N, C, HW) batch in its memory layout.
__device__ __forceinline__ int64_t channel_of(int64_t i, int64_t C, int64_t HW, bool nhwc) {
  return nhwc ? i % C : (i / HW) % C;
}

// What the sum kernels add per element (i: memory index, c: its channel); K sums per channel.
template <typename T>
struct SumOp {
  static constexpr int K = 1;
  const T* x;
  __device__ void add(double* acc, int64_t i, int64_t) const { acc[0] += static_cast<double>(to_f32(x[i])); }
};
template <typename T>
struct SqdevOp {
  static constexpr int K = 1;
  const T* x;
  const double* mean;
  __device__ void add(double* acc, int64_t i, int64_t c) const {
    const double d = static_cast<double>(to_f32(x[i])) - mean[c];
    acc[0] += d * d;
  }
};
template <typename T>
struct GradOp {
  static constexpr int K = 2;
  const T* dy;
  const T* x;
  const double* mean;
  const double* invstd;
  __device__ void add(double* acc, int64_t i, int64_t c) const {
    const double g = to_f32(dy[i]);
    acc[0] += g;
    acc[1] += g * ((static_cast<double>(to_f32(x[i])) - mean[c]) * invstd[c]);
  }
};

// Stage 1, NCHW: block (c, p) sums values [p * chunk_len, ...) of channel c (value m = n * HW + i
// lies in plane (n, c), contiguous within the plane). partial: (chunks, K, C).
template <typename Op>
__global__ void sums_nchw_kernel(double* partial, Op op, int64_t C, int64_t HW, int64_t M, int64_t chunk_len) {
  DP_SHARED(double, red, [Op::K][kSumThreads]);
  const int64_t c = blockIdx.x, p = blockIdx.y;
  const int64_t begin = p * chunk_len, end = min(M, begin + chunk_len);
  double acc[Op::K] = {};
  for (int64_t m = begin + threadIdx.x; m < end; m += kSumThreads) {
    const int64_t n = m / HW;
    op.add(acc, (n * C + c) * HW + (m - n * HW), c);
  }
  for (int k = 0; k < Op::K; ++k) red[k][threadIdx.x] = acc[k];
  __syncthreads();
  for (int w = kSumThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w)
      for (int k = 0; k < Op::K; ++k) red[k][threadIdx.x] += red[k][threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int k = 0; k < Op::K; ++k) partial[(p * Op::K + k) * C + c] = red[k][0];
}

// Stage 1, NHWC: block (t, p) sums rows [p * chunk_len, ...) of channels 32t .. 32t+31; a warp
// reads 32 neighbouring channels of one row (coalesced). partial: (chunks, K, C).
template <typename Op>
__global__ void sums_nhwc_kernel(double* partial, Op op, int64_t C, int64_t M, int64_t chunk_len) {
  DP_SHARED(double, red, [Op::K][kTileRows][kTileC]);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = blockIdx.x * int64_t(kTileC) + tx, p = blockIdx.y;
  const int64_t begin = p * chunk_len, end = min(M, begin + chunk_len);
  double acc[Op::K] = {};
  if (c < C)
    for (int64_t m = begin + ty; m < end; m += kTileRows) op.add(acc, m * C + c, c);
  for (int k = 0; k < Op::K; ++k) red[k][ty][tx] = acc[k];
  __syncthreads();
  for (int w = kTileRows / 2; w > 0; w >>= 1) {
    if (ty < w)
      for (int k = 0; k < Op::K; ++k) red[k][ty][tx] += red[k][ty + w][tx];
    __syncthreads();
  }
  if (ty == 0 && c < C)
    for (int k = 0; k < Op::K; ++k) partial[(p * Op::K + k) * C + c] = red[k][0][tx];
}

// Stage 2: out_k[c] = sum over chunks of partial[p][k][c], in chunk order.
__global__ void sums_finish_kernel(double* out0, double* out1, const double* partial, int64_t C, int K,
                                   int64_t chunks) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < K * C; j += int64_t(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(j / C);
    const int64_t c = j - k * C;
    double s = 0;
    for (int64_t p = 0; p < chunks; ++p) s += partial[(p * K + k) * C + c];
    (k == 0 ? out0 : out1)[c] = s;
  }
}

template <typename T>
__global__ void grad_input_kernel(T* dx, const T* dy, const T* x, const float* w, const double* mean,
                                  const double* invstd, const double* sum_dy, const double* sum_dy_xhat, double count,
                                  int64_t total, int64_t C, int64_t HW, bool nhwc) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = channel_of(i, C, HW, nhwc);
    const double m = mean[c], is = invstd[c], k = w[c] * is;
    const double a = sum_dy[c] / count, bb = sum_dy_xhat[c] / count;
    const double g = to_f32(dy[i]), xv = to_f32(x[i]);
    dx[i] = from_f32<T>(static_cast<float>(k * (g - a - (xv - m) * is * bb)));
  }
}

#define DP_FOR_CHANNELS(c, C) \
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < (C); c += int64_t(gridDim.x) * blockDim.x)

__global__ void set_count_kernel(double* slot, double count) { *slot = count; }

__global__ void mean_kernel(double* mean, const double* sum, const double* count, int64_t C) {
  DP_FOR_CHANNELS(c, C) mean[c] = sum[c] / *count;
}

__global__ void finalize_kernel(double* invstd, float* running_mean, float* running_var, const double* mean,
                                const double* sqdev, double count, double momentum, double eps, bool update,
                                int64_t C) {
  DP_FOR_CHANNELS(c, C) {
    const double var = sqdev[c] / count;
    invstd[c] = 1.0 / sqrt(var + eps);
    if (update) {
      // The CPU twin's operations in its order, each rounded (no fused multiply-add): equal bits.
      const double unbias = count / (count - 1), keep = 1 - momentum;
      running_mean[c] = static_cast<float>(
          __dadd_rn(__dmul_rn(keep, static_cast<double>(running_mean[c])), __dmul_rn(momentum, mean[c])));
      running_var[c] = static_cast<float>(__dadd_rn(__dmul_rn(keep, static_cast<double>(running_var[c])),
                                                    __dmul_rn(__dmul_rn(momentum, var), unbias)));
    }
  }
}

__global__ void running_stats_kernel(double* mean, double* invstd, const float* running_mean,
                                     const float* running_var, double eps, int64_t C) {
  DP_FOR_CHANNELS(c, C) {
    mean[c] = running_mean[c];
    invstd[c] = 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
  }
}

__global__ void accumulate_kernel(float* dw, float* db, const double* sum_dy, const double* sum_dy_xhat, int64_t C) {
  DP_FOR_CHANNELS(c, C) {
    dw[c] = __fadd_rn(dw[c], static_cast<float>(sum_dy_xhat[c]));
    db[c] = __fadd_rn(db[c], static_cast<float>(sum_dy[c]));
  }
}

#undef DP_FOR_CHANNELS

__global__ void increment_kernel(int64_t* counter) { *counter += 1; }

bool valid(const BnDims& d) { return d.N >= 0 && d.C >= 0 && d.HW >= 0; }

// The two stages of a per-channel sum: out0 (and out1 when Op::K == 2) of C values.
template <typename Op>
cudaError_t run_sums(double* out0, double* out1, const Op& op, const BnDims& d, void* scratch, size_t scratch_bytes,
                     cudaStream_t stream) {
  if (d.C == 0) return cudaSuccess;
  if (!out0 || (Op::K == 2 && !out1) || !scratch || scratch_bytes < batchnorm_scratch_bytes(d))
    return cudaErrorInvalidValue;
  const BnPartition pt = batchnorm_partition(d);
  const int64_t M = d.N * d.HW;
  double* partial = static_cast<double*>(scratch);  // (chunks, K, C)
  const dim3 grid(static_cast<unsigned>(pt.tiles), static_cast<unsigned>(pt.chunks));
  if (d.nhwc)
    DP_LAUNCH(sums_nhwc_kernel<Op>, grid, dim3(kTileC, kTileRows), 0, stream)(partial, op, d.C, M, pt.chunk_len);
  else
    DP_LAUNCH(sums_nchw_kernel<Op>, grid, kSumThreads, 0, stream)(partial, op, d.C, d.HW, M, pt.chunk_len);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  DP_LAUNCH(sums_finish_kernel, grid_1d(Op::K * d.C), kThreads, 0, stream)(out0, out1, partial, d.C, Op::K, pt.chunks);
  DP_RETURN_LAUNCH();
}

}  // namespace

BnPartition batchnorm_partition(const BnDims& d) {
  BnPartition p;
  if (!valid(d)) return p;
  const int64_t M = d.N * d.HW;
  p.tiles = d.nhwc ? (d.C + kTileC - 1) / kTileC : d.C;
  // As many chunks as keep each at least kMinChunk values, within kMaxSumBlocks blocks in all
  // (at least one chunk, however many tiles).
  const int64_t by_size = (M + kMinChunk - 1) / kMinChunk;
  const int64_t by_blocks = kMaxSumBlocks / std::max<int64_t>(p.tiles, 1);
  p.chunks = std::max<int64_t>(1, std::min(by_size, by_blocks));
  p.chunk_len = (M + p.chunks - 1) / p.chunks;
  // Rounding the length up may leave the last chunks empty: drop them.
  if (p.chunk_len > 0) p.chunks = (M + p.chunk_len - 1) / p.chunk_len;
  return p;
}

size_t batchnorm_scratch_bytes(const BnDims& d) {
  if (!valid(d)) return 0;
  return static_cast<size_t>(batchnorm_partition(d).chunks * 2 * d.C) * sizeof(double);
}

cudaError_t batchnorm_channel_sum(double* sum, const void* x, DType dtype, const BnDims& d, void* scratch,
                                  size_t scratch_bytes, cudaStream_t stream) {
  if (!valid(d)) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    return run_sums(sum, nullptr, SumOp<T>{static_cast<const T*>(x)}, d, scratch, scratch_bytes, stream);
  });
}

cudaError_t batchnorm_channel_sqdev(double* sqdev, const void* x, DType dtype, const double* mean, const BnDims& d,
                                    void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  if (!valid(d)) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    return run_sums(sqdev, nullptr, SqdevOp<T>{static_cast<const T*>(x), mean}, d, scratch, scratch_bytes, stream);
  });
}

cudaError_t batchnorm_grad_sums(double* sum_dy, double* sum_dy_xhat, const void* dy, const void* x, DType dtype,
                                const double* mean, const double* invstd, const BnDims& d, void* scratch,
                                size_t scratch_bytes, cudaStream_t stream) {
  if (!valid(d)) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    const GradOp<T> op{static_cast<const T*>(dy), static_cast<const T*>(x), mean, invstd};
    return run_sums(sum_dy, sum_dy_xhat, op, d, scratch, scratch_bytes, stream);
  });
}

cudaError_t batchnorm_grad_input(void* dx, const void* dy, const void* x, DType dtype, const float* w,
                                 const double* mean, const double* invstd, const double* sum_dy,
                                 const double* sum_dy_xhat, double count, const BnDims& d, cudaStream_t stream) {
  if (!valid(d) || !sum_dy || !sum_dy_xhat || !(count > 0)) return cudaErrorInvalidValue;
  const int64_t total = d.N * d.C * d.HW;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (total == 0) return cudaSuccess;
    DP_LAUNCH(grad_input_kernel<T>, grid_1d(total), kThreads, 0, stream)(
        static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), w, mean, invstd, sum_dy, sum_dy_xhat,
        count, total, d.C, d.HW, d.nhwc);
    DP_RETURN_LAUNCH();
  });
}

cudaError_t batchnorm_set_count(double* count_slot, double count, cudaStream_t stream) {
  if (!count_slot || !(count >= 0)) return cudaErrorInvalidValue;
  DP_LAUNCH(set_count_kernel, 1, 1, 0, stream)(count_slot, count);
  DP_RETURN_LAUNCH();
}

cudaError_t batchnorm_mean(double* mean, const double* sum, const double* count, int64_t C, cudaStream_t stream) {
  if (C < 0 || (C > 0 && !count)) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  DP_LAUNCH(mean_kernel, grid_1d(C), kThreads, 0, stream)(mean, sum, count, C);
  DP_RETURN_LAUNCH();
}

cudaError_t batchnorm_finalize(double* invstd, float* running_mean, float* running_var, const double* mean,
                               const double* sqdev, double count, double momentum, double eps, bool update_running,
                               int64_t C, cudaStream_t stream) {
  if (C < 0 || !(count > 0) || !(eps > 0) || (update_running && !(count > 1 && momentum >= 0 && momentum <= 1)))
    return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  DP_LAUNCH(finalize_kernel, grid_1d(C), kThreads, 0, stream)(
      invstd, running_mean, running_var, mean, sqdev, count, momentum, eps, update_running, C);
  DP_RETURN_LAUNCH();
}

cudaError_t batchnorm_running_stats(double* mean, double* invstd, const float* running_mean,
                                    const float* running_var, double eps, int64_t C, cudaStream_t stream) {
  if (C < 0 || !(eps > 0)) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  DP_LAUNCH(running_stats_kernel, grid_1d(C), kThreads, 0, stream)(mean, invstd, running_mean, running_var, eps, C);
  DP_RETURN_LAUNCH();
}

cudaError_t batchnorm_accumulate_param_grads(float* dw, float* db, const double* sum_dy, const double* sum_dy_xhat,
                                             int64_t C, cudaStream_t stream) {
  if (C < 0) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  DP_LAUNCH(accumulate_kernel, grid_1d(C), kThreads, 0, stream)(dw, db, sum_dy, sum_dy_xhat, C);
  DP_RETURN_LAUNCH();
}

cudaError_t increment_counter(int64_t* counter, cudaStream_t stream) {
  if (!counter) return cudaErrorInvalidValue;
  DP_LAUNCH(increment_kernel, 1, 1, 0, stream)(counter);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
