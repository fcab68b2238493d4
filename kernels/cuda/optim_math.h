// defines: sgd_update and adamw_update, one element of the fused optimizer kernels
// (kernels/cuda/optim.h) with the CPU twins' operations in the CPU twins' order
// (kernels/cpu/optim_sgd.cpp, optim_adamw.cpp: torch.optim's single-tensor paths), each a
// separately rounded fp:: operation. Host-callable, so tests compare them with the twins bit
// for bit without a GPU.
#pragma once
#include "kernels/cpu/optim_adamw.h"
#include "kernels/cpu/optim_sgd.h"
#include "kernels/cuda/host_device.h"

namespace dp::kernels::cuda {

// p, buf: updated in place (buf untouched when momentum == 0); g: the gradient.
DP_HD void sgd_update(float& p, float g, float& buf, const cpu::SgdScalars& s) {
  float d = g;
  if (s.weight_decay != 0.0f) d = fp::fma(s.weight_decay, p, d);  // grad.add(param, alpha=wd)
  if (s.momentum != 0.0f) {
    const float b = s.first_step ? d : fp::fma(s.one_minus_dampening, d, fp::mul(buf, s.momentum));
    buf = b;
    d = s.nesterov ? fp::fma(s.momentum, b, d) : b;
  }
  p = fp::fma(s.neg_lr, d, p);  // param.add_(d, alpha=-lr)
}

// p, m, v: updated in place; g: the gradient.
DP_HD void adamw_update(float& p, float g, float& m, float& v, const cpu::AdamWScalars& s) {
  const float w = s.one_minus_beta1;
  float pi = p;
  if (s.apply_decay) pi = fp::mul(pi, s.decay);  // param.mul_(1 - lr * wd)
  const float diff = fp::sub(g, m);
  // exp_avg.lerp_(g, w): at::lerp switches formula at |w| = 0.5
  const float mi = (w < 0.0f ? -w : w) < 0.5f ? fp::fma(w, diff, m) : fp::fma(fp::sub(w, 1.0f), diff, g);
  float vi = fp::mul(v, s.beta2);                      // exp_avg_sq.mul_(beta2)
  vi = fp::fma(fp::mul(s.one_minus_beta2, g), g, vi);  //   .addcmul_(g, g, value=1 - beta2)
  const float denom = fp::add(fp::div(fp::sqrt(vi), s.bias_correction2_sqrt), s.eps);
  pi = fp::add(pi, fp::div(fp::mul(s.neg_step_size, mi), denom));  // param.addcdiv_(m, denom, value=-step)
  m = mi;
  v = vi;
  p = pi;
}

}  // namespace dp::kernels::cuda
