// defines: gelu_tanh_f32_forward / gelu_tanh_f32_backward, GPT-2's tanh GELU on f32 as our own
// vectorised loops: what Gelu runs under the oneDNN backend (oneDNN 2.6's AVX2 eltwise GELU is
// 3.6x slower per element than its AVX-512 one; docs/cpu-performance.md, "GELU").
//
// The same function as gelu_ref.h's tanh form, written as a sigmoid so it needs one exponential
// of a non-positive argument (kernels/cpu/exp_nonpositive.h) and no tanh:
//   y = x/2 (1 + tanh(u)) = x s,   s = 1 / (1 + e^(-2u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
//   dy/dx = s + 2 x s (1 - s) du/dx,   du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// with e = e^(-2|u|) <= 1: s = 1/(1+e) and 1 - s = e/(1+e) for u >= 0, swapped for u < 0, so
// neither cancels. Each element's result is the same bits on every ISA clone (kernels/cpu/isa.h:
// the multiply-adds are explicit fused ones, fp::fma, and the file is built with -ffp-contract=off
// so the compiler fuses nothing else) and for any thread count;
// within 4e-7 (1 + x^2) of the f64 reference (tests/models/layers/gelu/test_gelu_tanh_f32.cpp).
// A NaN input gives NaN.
#pragma once
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dp::kernels::cpu {

// y (n) = gelu(x); y may alias x.
void gelu_tanh_f32_forward(float* y, const float* x, int64_t n);
// dx (n) = dy * gelu'(x); dx may alias dy or x.
void gelu_tanh_f32_backward(float* dx, const float* dy, const float* x, int64_t n);

// On a given clone, on the calling thread (tests compare the clones).
void gelu_tanh_f32_forward_on(CloneIsa isa, float* y, const float* x, int64_t n);
void gelu_tanh_f32_backward_on(CloneIsa isa, float* dx, const float* dy, const float* x, int64_t n);

}  // namespace dp::kernels::cpu
