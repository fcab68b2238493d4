// defines: the CPU reference of causal scaled dot-product attention over the heads of a fused
// qkv tensor (attention_forward / attention_backward), and dropout_logical (the attention
// dropout mask both CPU paths draw). Layouts, per sample n (C = H D):
//   qkv (N, T, 3C): q_h = qkv[n, :, h D : (h+1) D], k_h at C + h D, v_h at 2C + h D
//   att (N, T, C):  head h's output in columns [h D, (h+1) D)   (nanoGPT's transpose + view)
//   P (N, H, T, T): the probabilities, P[i, j] = 0 for j > i
// Sums in f64; each (n, h) is one task, so the result does not depend on the thread count.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// Inverted dropout on the attention probabilities: element with logical index `index` is kept
// iff the index-th uniform of Rng(seed, stream) is >= p (the dropout layer's rule,
// models/layers/dropout/dropout_ref.h), kept ones scaled by 1 / (1 - p). p = 0: no dropout.
struct AttnDropout {
  double p = 0;
  uint64_t seed = 0, stream = 0;
};

// out[k] = in[k] kept or 0 for k < n, where in[k] has logical index first + k.
template <typename T>
void dropout_logical(T* out, const T* in, int64_t n, uint64_t first, const AttnDropout& d);

// P and att from qkv: P = softmax(q k^T / sqrt(D), causal), att = dropout(P) v.
template <typename T>
void attention_forward(T* att, T* P, const T* qkv, int64_t N, int64_t Tn, int64_t H, int64_t D,
                       const AttnDropout& drop);

// dqkv (N, T, 3C) = gradient of att w.r.t. qkv, given datt and the forward's P (overwritten).
template <typename T>
void attention_backward(T* dqkv, const T* datt, const T* qkv, const T* P, int64_t N, int64_t Tn, int64_t H,
                        int64_t D, const AttnDropout& drop);

}  // namespace dp::kernels::cpu
