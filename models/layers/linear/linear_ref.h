// defines: linear_forward / linear_backward, the CPU reference of a fully connected layer
// (y = x W^T + b, PyTorch's nn.Linear layout), on OpenBLAS gemm.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// ld: the row stride of y and dy (0: O; else >= O, a padded output: models/layers/linear/linear.h
// pad_out_to). Its columns [O, ld) are written 0 by the forward and never read by the backward.

// y (N, O) = x (N, I) @ w^T + b;  w (O, I), b (O) or null.
template <typename T>
void linear_forward(T* y, const T* x, const T* w, const T* b, int64_t N, int64_t I, int64_t O, int64_t ld = 0);

// dw (O, I) += dy^T @ x;  db (O) += sum_n dy (null: no bias);  dx (N, I) = dy @ w (null: skip).
template <typename T>
void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int64_t N, int64_t I, int64_t O,
                     int64_t ld = 0);

}  // namespace dp::kernels::cpu
