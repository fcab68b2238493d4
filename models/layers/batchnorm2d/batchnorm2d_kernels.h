// defines: the CUDA twins of models/layers/batchnorm2d/batchnorm2d_ref.h's building blocks (per-channel sums,
// squared deviations, gradient sums and the input gradient) for NCHW and NHWC activations of
// f32, bf16 or f16, plus the per-channel steps between them (mean, 1/std and the running
// statistics, parameter-gradient accumulation) and the num_batches_tracked increment.
// BatchNorm2d uses them for SyncBN (the sums are all-reduced between the steps; the
// normalisation itself is batchnorm2d_apply.h's) and for eval's statistics; the one-pass kernels
// of train.bn_impl = "own" are batchnorm2d_reduce.h's.
//
// Sums and statistics are f64, as in the CPU twin (N*H*W values per channel). Every sum is
// deterministic: each block sums a fixed chunk of a channel's values in a fixed order (a fixed
// shared-memory tree at the end), the chunks' partial sums go to scratch, and a second kernel
// adds them up in chunk order; no atomics. The partition depends only on the shape
// (batchnorm_partition), so the same input always gives the same bits.
//
// Element math reads 16-bit data as float and widens to double; outputs are rounded once.
// Pointers are device pointers; weight and bias are f32 whatever the data type (BatchNorm2d
// keeps f32 parameters). Every wrapper validates its arguments (cudaErrorInvalidValue before
// any launch), launches on `stream` and returns cudaGetLastError(); check it with CHECK_CUDA.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"

namespace dp::kernels::cuda {

// A batch of activations: logical (N, C, H*W), stored NCHW or (nhwc) NHWC.
struct BnDims {
  int64_t N = 0, C = 0, HW = 0;
  bool nhwc = false;
};

// How the sum kernels split each channel's M = N*HW values: `tiles` blocks across the channels
// (one channel per tile for NCHW, 32 for NHWC) times `chunks` blocks along M, each summing
// chunk_len consecutive values (the last one fewer; none empty). Pure; tested on the host.
struct BnPartition {
  int64_t tiles = 0, chunks = 0, chunk_len = 0;
};
BnPartition batchnorm_partition(const BnDims& d);
// Bytes of scratch the sum wrappers need for d (the chunks' partial sums, two per channel).
size_t batchnorm_scratch_bytes(const BnDims& d);

// sum (C) = per-channel sum of x (N, C, HW); cpu::batchnorm2d_channel_sum.
[[nodiscard]] cudaError_t batchnorm_channel_sum(double* sum, const void* x, DType dtype, const BnDims& d,
                                                void* scratch, size_t scratch_bytes, cudaStream_t stream);
// sqdev (C) = per-channel sum of (x - mean[c])^2; cpu::batchnorm2d_channel_sqdev.
[[nodiscard]] cudaError_t batchnorm_channel_sqdev(double* sqdev, const void* x, DType dtype, const double* mean,
                                                  const BnDims& d, void* scratch, size_t scratch_bytes,
                                                  cudaStream_t stream);
// sum_dy (C) = sum dy; sum_dy_xhat (C) = sum dy * (x - mean) * invstd; cpu::batchnorm2d_grad_sums.
[[nodiscard]] cudaError_t batchnorm_grad_sums(double* sum_dy, double* sum_dy_xhat, const void* dy, const void* x,
                                              DType dtype, const double* mean, const double* invstd, const BnDims& d,
                                              void* scratch, size_t scratch_bytes, cudaStream_t stream);

// dx = w * invstd * (dy - sum_dy[c] / count - xhat * sum_dy_xhat[c] / count), xhat = (x - mean) * invstd:
// cpu::batchnorm2d_grad_input with the means formed here; count > 0.
[[nodiscard]] cudaError_t batchnorm_grad_input(void* dx, const void* dy, const void* x, DType dtype, const float* w,
                                               const double* mean, const double* invstd, const double* sum_dy,
                                               const double* sum_dy_xhat, double count, const BnDims& d,
                                               cudaStream_t stream);

// Per-channel steps (C values each).
// *count_slot = count: the value count of this rank's batch, stored after the sums so that one
// all-reduce adds the sums and the counts (SyncBN's first collective).
[[nodiscard]] cudaError_t batchnorm_set_count(double* count_slot, double count, cudaStream_t stream);
// mean (C) = sum[c] / *count (count: a device value, the all-reduced count under SyncBN).
[[nodiscard]] cudaError_t batchnorm_mean(double* mean, const double* sum, const double* count, int64_t C,
                                         cudaStream_t stream);
// var = sqdev[c] / count (biased: what the batch is normalised with); invstd (C) = 1/sqrt(var + eps).
// update_running: running_mean = (1 - momentum) running_mean + momentum mean, running_var likewise
// with the unbiased var * count / (count - 1), as torch (count > 1 then).
[[nodiscard]] cudaError_t batchnorm_finalize(double* invstd, float* running_mean, float* running_var,
                                             const double* mean, const double* sqdev, double count, double momentum,
                                             double eps, bool update_running, int64_t C, cudaStream_t stream);
// mean (C) = running_mean; invstd (C) = 1/sqrt(running_var + eps): eval's constants.
[[nodiscard]] cudaError_t batchnorm_running_stats(double* mean, double* invstd, const float* running_mean,
                                                  const float* running_var, double eps, int64_t C,
                                                  cudaStream_t stream);
// dw (C) += f32(sum_dy_xhat); db (C) += f32(sum_dy), as the CPU twin accumulates.
[[nodiscard]] cudaError_t batchnorm_accumulate_param_grads(float* dw, float* db, const double* sum_dy,
                                                           const double* sum_dy_xhat, int64_t C, cudaStream_t stream);
// *counter += 1 (num_batches_tracked, a device i64).
[[nodiscard]] cudaError_t increment_counter(int64_t* counter, cudaStream_t stream);

}  // namespace dp::kernels::cuda
