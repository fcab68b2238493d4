#include "kernels/cpu/optim_sgd.h"

#include <algorithm>

namespace dp::kernels::cpu {
namespace {

// buf is read and written only with momentum (the CUDA kernel's rule too), and not read on the
// first step, when it is (re)initialised.
DP_FMA_CLONES
void sgd_chunk(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  if (s.momentum == 0.0f) buf = nullptr;
  for (int64_t i = 0; i < n; ++i) {
    float b = buf && !s.first_step ? buf[i] : 0.0f;
    sgd_update(p[i], g[i], b, s);
    if (buf) buf[i] = b;
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
