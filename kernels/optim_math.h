// defines: SgdScalars, AdamWScalars (the per-step scalars) and sgd_update, adamw_update, one
// element of SGD and AdamW as torch.optim's single-tensor paths compute it. The one copy of the
// optimizers' element math: the CPU kernels (kernels/cpu/optim_sgd.cpp, optim_adamw.cpp) and the
// fused CUDA kernels (kernels/cuda/optim.cu) both run these functions, each operation a separately
// rounded fp:: one (kernels/host_device.h), so the two give the same bits.
#pragma once
#include "kernels/host_device.h"

namespace dp::kernels {

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

// AdamW's per-step scalars, computed in double by the caller exactly as torch does in Python and
// then rounded to float (torch casts Python-float scalars to the tensor dtype).
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

// The spans of the flat parameter arena that weight decay leaves out (train.decay_params =
// "matrices": biases and normalisation parameters, as nanoGPT's parameter groups): `count` sorted,
// disjoint, non-empty [begin, end) element ranges, bounds[2k] = begin_k, bounds[2k + 1] = end_k
// (host memory for the CPU kernels, device memory for the CUDA ones). count 0: decay everywhere.
struct DecaySkips {
  const int64_t* bounds = nullptr;
  int32_t count = 0;
};

// True when element i lies in one of the skipped spans (a binary search over them).
DP_HD bool decay_skipped(const DecaySkips& d, int64_t i) {
  int32_t lo = 0, hi = d.count;  // the answer is the last span whose begin is <= i
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (d.bounds[2 * mid] <= i) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && i < d.bounds[2 * (lo - 1) + 1];
}

// The scalars of an element weight decay leaves out: the same update without the decay term.
DP_HD SgdScalars without_decay(SgdScalars s) {
  s.weight_decay = 0.0f;
  return s;
}
DP_HD AdamWScalars without_decay(AdamWScalars s) {
  s.apply_decay = false;
  return s;
}

// torch/optim/sgd.py, _single_tensor_sgd: one float rounding per torch op, and
// `x.add(y, alpha=a)` as the fused multiply-add fma(a, y, x) that torch's vectorised CPU kernels
// compute. p, buf: updated in place (buf untouched when momentum == 0; its old value unread on
// the first step); g: the gradient.
DP_HD void sgd_update(float& p, float g, float& buf, const SgdScalars& s) {
  float d = g;
  if (s.weight_decay != 0.0f) d = fp::fma(s.weight_decay, p, d);  // grad.add(param, alpha=wd)
  if (s.momentum != 0.0f) {
    // buf.mul_(momentum).add_(d, alpha=1 - dampening), or buf = d on the first step
    const float b = s.first_step ? d : fp::fma(s.one_minus_dampening, d, fp::mul(buf, s.momentum));
    buf = b;
    d = s.nesterov ? fp::fma(s.momentum, b, d) : b;  // d.add(buf, alpha=momentum) or buf
  }
  p = fp::fma(s.neg_lr, d, p);  // param.add_(d, alpha=-lr)
}

// torch/optim/adam.py, _single_tensor_adam with decoupled_weight_decay, amsgrad off: one float
// rounding per torch op, with fused multiply-adds where torch's vectorised CPU kernels use them
// (at::lerp, addcmul). Matches PyTorch's float32 results bit for bit except, rarely, by one ulp
// (tests/oracle/test_optim_torch.py). p, m, v: updated in place; g: the gradient.
DP_HD void adamw_update(float& p, float g, float& m, float& v, const AdamWScalars& s) {
  const float w = s.one_minus_beta1;
  float pi = p;
  if (s.apply_decay) pi = fp::mul(pi, s.decay);  // param.mul_(1 - lr * wd)
  const float diff = fp::sub(g, m);
  // exp_avg.lerp_(g, w): m + w (g - m), or for |w| >= 0.5 (at::lerp switches formula there)
  // g - (1 - w)(g - m)
  const float mi = (w < 0.0f ? -w : w) < 0.5f ? fp::fma(w, diff, m) : fp::fma(fp::sub(w, 1.0f), diff, g);
  float vi = fp::mul(v, s.beta2);                      // exp_avg_sq.mul_(beta2)
  vi = fp::fma(fp::mul(s.one_minus_beta2, g), g, vi);  //   .addcmul_(g, g, value=1 - beta2)
  const float denom = fp::add(fp::div(fp::sqrt(vi), s.bias_correction2_sqrt), s.eps);
  pi = fp::add(pi, fp::div(fp::mul(s.neg_step_size, mi), denom));  // param.addcdiv_(m, denom, value=-step)
  m = mi;
  v = vi;
  p = pi;
}

}  // namespace dp::kernels
