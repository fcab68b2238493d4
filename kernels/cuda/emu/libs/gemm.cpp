#include "kernels/cuda/emu/libs/gemm.h"

#include "base/half.h"
#include "kernels/cuda/emu/libs/elements.h"

namespace dp::emu::libs {
namespace {

float to_tf32(float v) {
  const uint32_t u = kernels::cpu::f32_bits(v);
  if ((u & 0x7F800000u) == 0x7F800000u) return v;                     // inf, NaN as they are
  return kernels::cpu::f32_from_bits((u + 0x1000u) & ~0x1FFFu);        // finite: keep 10 mantissa bits
}

float element(const Operand& x, int64_t r, int64_t c, bool tf32) {
  const float v = x.trans ? load(x.p, x.type, r * x.ld + c) : load(x.p, x.type, c * x.ld + r);
  return tf32 ? to_tf32(v) : v;
}

}  // namespace

std::vector<float> column_major_product(int64_t m, int64_t n, int64_t k, const Operand& a, const Operand& b,
                                        bool tf32) {
  // op(A) row by row and op(B) column by column, in f32, so that the sum walks both contiguously.
  std::vector<float> ar(static_cast<size_t>(m * k)), bc(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) ar[static_cast<size_t>(i * k + p)] = element(a, i, p, tf32);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p) bc[static_cast<size_t>(j * k + p)] = element(b, p, j, tf32);
  std::vector<float> acc(static_cast<size_t>(m * n), 0.0f);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      const float* x = &ar[static_cast<size_t>(i * k)];
      const float* y = &bc[static_cast<size_t>(j * k)];
      float s = 0.0f;
      for (int64_t p = 0; p < k; ++p) s += x[p] * y[p];
      acc[static_cast<size_t>(j * m + i)] = s;
    }
  return acc;
}

}  // namespace dp::emu::libs
