#include "kernels/cpu/optim_sgd.h"

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

// The operations and their order follow torch.optim.SGD's single-tensor path (torch/optim/sgd.py,
// _single_tensor_sgd): one float rounding per torch op, and `x.add(y, alpha=a)` as the fused
// multiply-add fma(a, y, x) that torch's vectorised CPU kernels compute. This reproduces
// PyTorch's float32 results bit for bit (tests/oracle/test_optim_torch.py).
DP_FMA_CLONES
void sgd_chunk(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  const bool use_momentum = s.momentum != 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if (s.weight_decay != 0.0f) d = std::fma(s.weight_decay, p[i], d);  // grad.add(param, alpha=wd)
    if (use_momentum) {
      // buf.mul_(momentum).add_(d, alpha=1 - dampening), or buf = d on the first step
      float b = s.first_step ? d : std::fma(s.one_minus_dampening, d, buf[i] * s.momentum);
      buf[i] = b;
      d = s.nesterov ? std::fma(s.momentum, b, d) : b;  // d.add(buf, alpha=momentum) or buf
    }
    p[i] = std::fma(s.neg_lr, d, p[i]);  // param.add_(d, alpha=-lr)
  }
}

}  // namespace

void sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  constexpr int64_t kChunk = 1 << 14;  // elements per task; elementwise, so any split gives the same bits
#pragma omp parallel for schedule(static) if (n > 2 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk)
    sgd_chunk(p + c, g + c, buf ? buf + c : nullptr, std::min(kChunk, n - c), s);
}

}  // namespace dp::kernels::cpu
