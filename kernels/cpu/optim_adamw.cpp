#include "kernels/cpu/optim_adamw.h"

#include <algorithm>

#include "kernels/cpu/isa.h"

namespace dp::kernels::cpu {
namespace {

// The scalars copied first: a float the loop stores might alias the caller's, which would keep
// the compiler from hoisting them out of the loop and from vectorising it (with -fno-math-errno
// for the square root: kernels/CMakeLists.txt). Vectorised, one step over GPT's 10.8 M parameters
// took 5.7 ms instead of 26.5 (Zen 5, one thread); each lane does the same rounded operations as
// the scalar loop, so the bits are the same.
[[gnu::always_inline]] inline void adamw_chunk_body(float* p, const float* g, float* m, float* v, int64_t n,
                                                   const AdamWScalars& s) {
  const AdamWScalars sc = s;
  for (int64_t i = 0; i < n; ++i) adamw_update(p[i], g[i], m[i], v[i], sc);
}
DP_FMA_CLONES(void, adamw_chunk, (float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s),
              (p, g, m, v, n, s))

}  // namespace

void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  constexpr int64_t kChunk = 1 << 14;  // elements per task; elementwise, so any split gives the same bits
#pragma omp parallel for schedule(static) if (n > 2 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk)
    adamw_chunk(p + c, g + c, m + c, v + c, std::min(kChunk, n - c), s);
}

void adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s,
                const DecaySkips& skips) {
  // Runs of elements with and without decay, each one pass of the plain step.
  int64_t at = 0;
  for (int32_t k = 0; k <= skips.count; ++k) {
    const int64_t begin = k < skips.count ? skips.bounds[2 * k] : n, end = k < skips.count ? skips.bounds[2 * k + 1] : n;
    if (begin > at) adamw_step(p + at, g + at, m + at, v + at, begin - at, s);
    if (end > begin) adamw_step(p + begin, g + begin, m + begin, v + begin, end - begin, without_decay(s));
    at = end;
  }
}

}  // namespace dp::kernels::cpu
