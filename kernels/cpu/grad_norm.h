// defines: sum_of_squares and clip_by_norm, the global gradient norm and torch's
// clip_grad_norm_ over the flat gradient arena: the CPU twins of kernels/cuda/grad_norm.h, in the
// order kernels/grad_norm_math.h fixes (the same bits as the GPU, for any thread count).
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// sum_i x[i]^2 in double, in kernels/grad_norm_math.h's order. x: (n,).
double sum_of_squares(const float* x, int64_t n);
// x (n) *= clip_coefficient(sum_sq, max_norm) when that is below 1 (one float multiply each).
void clip_by_norm(float* x, int64_t n, double sum_sq, double max_norm);

}  // namespace dp::kernels::cpu
