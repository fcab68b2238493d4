#include "kernels/cpu/grad_norm.h"

#include <algorithm>
#include <vector>

#include "kernels/grad_norm_math.h"

namespace dp::kernels::cpu {
namespace {

// t[j] += t[j + w] for w = kNormThreads / 2 ... 1: the blocks' shared-memory fold.
double fold(double* t) {
  for (int w = kNormThreads / 2; w > 0; w >>= 1)
    for (int j = 0; j < w; ++j) t[j] += t[j + w];
  return t[0];
}

// One chunk (m <= kNormChunk elements) as one block sums it.
double chunk_sum(const float* x, int64_t m) {
  double t[kNormThreads];
  for (int j = 0; j < kNormThreads; ++j) {
    double s = 0;
    for (int64_t i = j; i < m; i += kNormThreads) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    t[j] = s;
  }
  return fold(t);
}

}  // namespace

double sum_of_squares(const float* x, int64_t n) {
  if (n <= 0) return 0;
  const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
  std::vector<double> partial(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 64)
  for (int64_t c = 0; c < chunks; ++c)
    partial[c] = chunk_sum(x + c * kNormChunk, std::min(kNormChunk, n - c * kNormChunk));
  double t[kNormThreads];
  for (int j = 0; j < kNormThreads; ++j) {
    double s = 0;
    for (int64_t i = j; i < chunks; i += kNormThreads) s += partial[i];
    t[j] = s;
  }
  return fold(t);
}

void clip_by_norm(float* x, int64_t n, double sum_sq, double max_norm) {
  const float c = clip_coefficient(sum_sq, max_norm);
  if (c == 1.0f) return;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) x[i] = fp::mul(x[i], c);
}

}  // namespace dp::kernels::cpu
