// defines: adamw_step, the CPU reference kernel of AdamW (Loshchilov & Hutter, "Decoupled Weight
// Decay Regularization", ICLR 2019) as torch.optim.AdamW computes it (raw pointers; the runtime
// wrapper is runtime/optim/adamw.h).
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// Per-step scalars, computed in double by the caller exactly as torch does in Python and then
// rounded to float (torch casts Python-float scalars to the tensor dtype).
struct AdamWScalars {
  float decay = 1;              // 1 - lr * weight_decay
  float one_minus_beta1 = 0.1f; // lerp weight for the first moment
  float beta2 = 0.999f;
  float one_minus_beta2 = 0.001f;
  float bias_correction2_sqrt = 1;  // sqrt(1 - beta2^t)
  float neg_step_size = 0;          // -lr / (1 - beta1^t)
  float eps = 1e-8f;
  bool apply_decay = false;         // weight_decay != 0
};

// One step, elementwise over n parameters (t = the step number, starting at 1):
//   p = p * (1 - lr * wd)
//   m = m + (1 - beta1) * (g - m)              (torch's lerp, for weights < 0.5)
//   v = beta2 * v + (1 - beta2) * g * g
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// p: (n,) parameters, updated; g: (n,) gradients; m, v: (n,) first/second moments, updated.
void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s);

}  // namespace dp::kernels::cpu
