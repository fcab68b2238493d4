// defines: sgd_step, the CPU reference kernel of SGD with momentum, dampening, weight decay and
// Nesterov (raw pointers; the runtime wrapper is runtime/optim/sgd.h).
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// Scalars as torch.optim.SGD uses them: torch casts each Python-float alpha to the tensor's
// dtype, so the caller rounds the double hyper-parameters to float once, the same way.
struct SgdScalars {
  float neg_lr = 0;                // -lr
  float weight_decay = 0;
  float momentum = 0;
  float one_minus_dampening = 1;   // 1 - dampening
  bool nesterov = false;
  bool first_step = false;         // momentum buffer is (re)initialised to the gradient
};

// One step, elementwise over n parameters:
//   d = g + wd * p
//   buf = first_step ? d : momentum * buf + (1 - dampening) * d       (only when momentum != 0)
//   d = nesterov ? d + momentum * buf : buf                           (only when momentum != 0)
//   p = p - lr * d
// p: (n,) parameters, updated; g: (n,) gradients; buf: (n,) momentum buffer, updated; may be
// null when momentum == 0.
void sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s);

}  // namespace dp::kernels::cpu
