// defines: exp_nonpositive, e^x for x <= 0 as a branch-free f32 polynomial the compiler
// vectorises: the attention cores' softmax exponentials (models/layers/attention/causal_core.cpp,
// flash_core.cpp) and the tanh GELU's sigmoid (models/layers/gelu/gelu_tanh_f32.cpp).
#pragma once
#include <cstdint>
#include <cstring>

namespace dp::kernels::cpu {

// e^x for x <= 0 (scores minus their row maximum), within 2 ulp of expf for x >= -87 and a
// denormal-free ~1e-38 below: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, and Cephes'
// minimax polynomial for e^r; branch-free, so the loops that call it vectorise.
#pragma omp declare simd
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  // x = max(x, -87) on the bits: a negative float's bits, read unsigned, grow with its magnitude,
  // so an unsigned min clamps it (-inf too); a float compare would keep GCC from vectorising the
  // loops for AVX2 (it may trap, and only AVX-512 masks it).
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = u > 0xC2AE0000u ? 0xC2AE0000u : u;  // 0xC2AE0000: -87.0f
  std::memcpy(&x, &u, sizeof x);
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round(x / ln2), |x / ln2| < 2^22
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;       // x - n ln2 (ln2 in two parts)
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

}  // namespace dp::kernels::cpu
