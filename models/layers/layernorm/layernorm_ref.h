// defines: layernorm_forward / layernorm_backward, the CPU reference of layer normalisation over
// the last dimension (PyTorch's F.layer_norm: biased variance, eps inside the square root), with
// the sums in f64.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// y (M, C) = (x - mean_m) / sqrt(var_m + eps) * w + b  (b null: no shift).
template <typename T>
void layernorm_forward(T* y, const T* x, const T* w, const T* b, int64_t M, int64_t C, double eps);

// With xhat = (x - mean) * rstd, g = dy * w:
//   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))      (null: skipped; overwritten)
//   dw += sum_m dy * xhat,  db += sum_m dy                      (db null: no bias)
// The statistics are recomputed from x; the parameter sums run over m in order.
template <typename T>
void layernorm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int64_t M, int64_t C, double eps);

}  // namespace dp::kernels::cpu
