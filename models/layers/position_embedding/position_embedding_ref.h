// defines: position_embedding_forward / _backward, the CPU kernels of the position embedding
// (a broadcast add over the batch and its reduction): plain loops, the same for f32 and f64.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// y (N, T, C) = x + w[t, :];  w (>= T, C).
template <typename T>
void position_embedding_forward(T* y, const T* x, const T* w, int64_t N, int64_t Tn, int64_t C);

// dw[t, :] += sum_n dy[n, t, :] (n in order; one thread per range of positions).
template <typename T>
void position_embedding_backward(T* dw, const T* dy, int64_t N, int64_t Tn, int64_t C);

}  // namespace dp::kernels::cpu
