// defines: gelu_forward / gelu_backward, the CPU reference of GELU (PyTorch's F.gelu), each
// element computed in f64:
//   tanh: y = x/2 (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//         dy/dx = (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2),  t = tanh(u)
//   erf:  y = x/2 (1 + erf(x / sqrt 2)),  dy/dx = (1 + erf(x / sqrt 2))/2 + x exp(-x^2/2) / sqrt(2 pi)
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

template <typename T>
void gelu_forward(T* y, const T* x, int64_t n, bool tanh_approximation);
// dx = dy * gelu'(x) (overwritten).
template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, int64_t n, bool tanh_approximation);

}  // namespace dp::kernels::cpu
