#include "kernels/cpu/optim_sgd.h"

#include <algorithm>

#include "kernels/cpu/isa.h"

namespace dp::kernels::cpu {
namespace {

// buf is read and written only with momentum (the CUDA kernel's rule too), and not read on the
// first step, when it is (re)initialised.
// The scalars copied first, as in optim_adamw.cpp, so the loop vectorises.
[[gnu::always_inline]] inline void sgd_chunk_body(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  const SgdScalars sc = s;
  if (sc.momentum == 0.0f) buf = nullptr;
  for (int64_t i = 0; i < n; ++i) {
    float b = buf && !sc.first_step ? buf[i] : 0.0f;
    sgd_update(p[i], g[i], b, sc);
    if (buf) buf[i] = b;
  }
}
DP_FMA_CLONES(void, sgd_chunk, (float* p, const float* g, float* buf, int64_t n, const SgdScalars& s),
              (p, g, buf, n, s))

}  // namespace

void sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  constexpr int64_t kChunk = 1 << 14;  // elements per task; elementwise, so any split gives the same bits
#pragma omp parallel for schedule(static) if (n > 2 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk)
    sgd_chunk(p + c, g + c, buf ? buf + c : nullptr, std::min(kChunk, n - c), s);
}

void sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s, const DecaySkips& skips) {
  int64_t at = 0;
  for (int32_t k = 0; k <= skips.count; ++k) {
    const int64_t begin = k < skips.count ? skips.bounds[2 * k] : n, end = k < skips.count ? skips.bounds[2 * k + 1] : n;
    if (begin > at) sgd_step(p + at, g + at, buf ? buf + at : nullptr, begin - at, s);
    if (end > begin) sgd_step(p + begin, g + begin, buf ? buf + begin : nullptr, end - begin, without_decay(s));
    at = end;
  }
}

}  // namespace dp::kernels::cpu
