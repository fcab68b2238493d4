// defines: adamw_step, the CPU kernel of AdamW (Loshchilov & Hutter, "Decoupled Weight Decay
// Regularization", ICLR 2019) as torch.optim.AdamW computes it (raw pointers; the runtime
// wrapper is runtime/optim/adamw.h). Its element math is kernels/optim_math.h's adamw_update,
// the same the CUDA kernel runs.
#pragma once
#include <cstdint>

#include "kernels/optim_math.h"

namespace dp::kernels::cpu {

// One step, elementwise over n parameters (t = the step number, starting at 1):
//   p = p * (1 - lr * wd)
//   m = m + (1 - beta1) * (g - m)              (torch's lerp, for weights < 0.5)
//   v = beta2 * v + (1 - beta2) * g * g
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// p: (n,) parameters, updated; g: (n,) gradients; m, v: (n,) first/second moments, updated.
void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);
// The same, without the decay term on the elements of `skips` (host memory).
void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s,
                const DecaySkips& skips);

}  // namespace dp::kernels::cpu
