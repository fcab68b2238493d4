// defines: the GPU twin of the synthetic data set (runtime/data/synthetic.cpp; data.dataset =
// "synthetic" with data.synthetic_device = "cuda"): synthetic_labels and synthetic_batch make a
// batch of samples, given their indices, on the device, with the element math the CPU generator
// runs (kernels/synthetic_math.h), normalised and cast as the input pipeline's augmentation does
// (kernels/cuda/augment.h, without crop or flip), in the compute dtype and layout the model takes.
// The result equals the CPU loader's batch through the input pipeline bit for bit.
// synthetic_token_windows makes the token windows of a model that takes tokens
// (runtime/data/synthetic_tokens.cpp) as the model's inputs and targets, equal to the CPU data
// set's get_tokens windows split as the input pipeline splits them (kernels/cuda/tokens.h).
//
// Returns cudaErrorInvalidValue before any CUDA call for bad arguments, else the launch status
// (check with CHECK_CUDA). All pointers on the device; 0 rows launch nothing.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/augment.h"

namespace dp::kernels::cuda {

// y (rows) = the labels of samples indices (rows) of the data set with `seed` and `classes`
// (>= 1); words (rows) = how many random words each label's draw used (where its pixels' noise
// starts). One thread per row.
[[nodiscard]] cudaError_t synthetic_labels(int32_t* y, uint32_t* words, const int64_t* indices, int64_t rows,
                                           uint64_t seed, int64_t classes, cudaStream_t stream);

// out: (B, C, H, W) in `out_type`, stored NCHW, or NHWC when channels_last; row b is sample
// indices[b], whose label and words synthetic_labels wrote. Each value is the CPU's
// (0.6 P[label] + 0.4 u), then (v - mean[c]) / std[c] when mean and std are given (both or
// neither), rounded to the compute dtype. One thread per output element, in storage order.
[[nodiscard]] cudaError_t synthetic_batch(void* out, AugmentOut out_type, bool channels_last, AugmentDims dims,
                                          const int64_t* indices, const int32_t* labels, const uint32_t* words,
                                          uint64_t seed, const float* mean, const float* std, cudaStream_t stream);

// x (rows, T) and y (rows, T) i32: row r is window indices[r] (each below 2^55) of the synthetic
// token data set with `seed` and `vocab` (1..65536, as its uint16 tokens): x[r][t] = token t,
// y[r][t] = token t + 1 (synthetic_token). rows >= 0, T >= 1. One thread per window token
// (rows x (T + 1)), each one Philox block, writing x, y or both.
[[nodiscard]] cudaError_t synthetic_token_windows(int32_t* x, int32_t* y, const int64_t* indices, int64_t rows,
                                                  int64_t T, uint64_t seed, int64_t vocab, cudaStream_t stream);

}  // namespace dp::kernels::cuda
