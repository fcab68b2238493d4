// defines: sgd_step, the CPU kernel of SGD with momentum, dampening, weight decay and Nesterov
// (raw pointers; the runtime wrapper is runtime/optim/sgd.h). Its element math is
// kernels/optim_math.h's sgd_update, the same the CUDA kernel runs.
#pragma once
#include <cstdint>

#include "kernels/optim_math.h"

namespace dp::kernels::cpu {

// One step, elementwise over n parameters:
//   d = g + wd * p
//   buf = first_step ? d : momentum * buf + (1 - dampening) * d       (only when momentum != 0)
//   d = nesterov ? d + momentum * buf : buf                           (only when momentum != 0)
//   p = p - lr * d
// p: (n,) parameters, updated; g: (n,) gradients; buf: (n,) momentum buffer, updated; may be
// null when momentum == 0.
void sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s);
// The same, without the decay term on the elements of `skips` (host memory).
void sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s, const DecaySkips& skips);

}  // namespace dp::kernels::cpu
