// defines: the CUDA twin of models/layers/attention/attention_ref.h: causal scaled dot-product
// attention over the heads of a fused qkv tensor, f32, forward and backward, with the attention
// dropout of the CPU paths (the same Philox mask at the same logical indices). The straightforward
// kernel that stands beside cuDNN's SDPA: simple and correct over fast (one thread per query row
// or key row of one (n, h); sums in f32, in an order fixed by T and D: deterministic, no atomics).
// Layouts as attention_ref.h, per sample n (C = H D):
//   qkv (N, T, 3C): q_h = qkv[n, :, h D : (h+1) D], k_h at C + h D, v_h at 2C + h D
//   att (N, T, C):  head h's output in columns [h D, (h+1) D)
//   P (N, H, T, T): the probabilities (before dropout), P[i, j] = 0 for j > i
// Returns the launch status (check with CHECK_CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "models/layers/attention/attention_ref.h"

namespace dp::kernels::cuda {

// P and att from qkv: P = softmax(q k^T / sqrt(D), causal), att = dropout(P) v.
// N, T >= 0, H, D >= 1, drop.p in [0, 1); else cudaErrorInvalidValue.
[[nodiscard]] cudaError_t attention_forward(float* att, float* P, const float* qkv, int64_t N, int64_t T, int64_t H,
                                            int64_t D, const cpu::AttnDropout& drop, cudaStream_t stream);

// dqkv (N, T, 3C) = gradient of att w.r.t. qkv, given datt and the forward's P (overwritten).
// row_dot (N, H, T): device scratch (each query row's sum_j P dP).
[[nodiscard]] cudaError_t attention_backward(float* dqkv, float* row_dot, const float* datt, const float* qkv,
                                             const float* P, int64_t N, int64_t T, int64_t H, int64_t D,
                                             const cpu::AttnDropout& drop, cudaStream_t stream);

}  // namespace dp::kernels::cuda
