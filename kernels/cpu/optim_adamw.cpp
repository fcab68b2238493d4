#include "kernels/cpu/optim_adamw.h"

#include <algorithm>
#include <cmath>

namespace dp::kernels::cpu {
namespace {

// std::fma is one instruction on FMA hardware but a libm call when compiling for baseline
// x86-64; an FMA clone selected at load time keeps the kernel fast without changing its results
// (fma is exactly rounded either way).
#if defined(__x86_64__) && defined(__GNUC__)
#define DP_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DP_FMA_CLONES
#endif

// Operation order follows torch.optim.AdamW's single-tensor path (torch/optim/adam.py,
// _single_tensor_adam with decoupled_weight_decay, amsgrad off): one float rounding per torch op,
// with fused multiply-adds where torch's vectorised CPU kernels use them (at::lerp, addcmul).
// Matches PyTorch's float32 results bit for bit except, rarely, by one ulp
// (tests/oracle/test_optim_torch.py).
DP_FMA_CLONES
void adamw_chunk(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  const float w = s.one_minus_beta1;
  const bool small_weight = std::fabs(w) < 0.5f;  // at::lerp switches formula at |w| = 0.5
  for (int64_t i = 0; i < n; ++i) {
    float pi = p[i];
    if (s.apply_decay) pi = pi * s.decay;  // param.mul_(1 - lr * wd)
    const float gi = g[i];
    float mi = m[i];
    // exp_avg.lerp_(g, 1 - beta1): m + w (g - m), or for large w: g - (1 - w)(g - m)
    mi = small_weight ? std::fma(w, gi - mi, mi) : std::fma(w - 1.0f, gi - mi, gi);
    float vi = v[i] * s.beta2;                      // exp_avg_sq.mul_(beta2)
    vi = std::fma(s.one_minus_beta2 * gi, gi, vi);  //   .addcmul_(g, g, value=1 - beta2)
    const float denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
    pi = pi + s.neg_step_size * mi / denom;  // param.addcdiv_(m, denom, value=-step_size)
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
  }
}

}  // namespace

void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  constexpr int64_t kChunk = 1 << 14;  // elements per task; elementwise, so any split gives the same bits
#pragma omp parallel for schedule(static) if (n > 2 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk)
    adamw_chunk(p + c, g + c, m + c, v + c, std::min(kChunk, n - c), s);
}

}  // namespace dp::kernels::cpu
