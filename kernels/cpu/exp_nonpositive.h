// defines: exp_nonpositive, e^x for x <= 0 as a branch-free f32 polynomial the compiler
// vectorises: the attention cores' softmax exponentials (models/layers/attention/causal_core.cpp,
// flash_core.cpp) and the tanh GELU's sigmoid (models/layers/gelu/gelu_tanh_f32.cpp).
#pragma once
#include <cstdint>

#include "base/half.h"
#include "kernels/host_device.h"

namespace dp::kernels::cpu {

// e^x for x <= 0 (scores minus their row maximum), within 2 ulp of expf for x >= -87, a
// denormal-free ~1e-38 below (a NaN with its sign bit set too: the clamp below takes it for a
// large negative number) and NaN for a positive NaN: Cody-Waite range reduction x = n ln2 + r,
// |r| <= ln2/2, and Cephes' minimax polynomial for e^r; branch-free, so the loops that call it
// vectorise. Its multiply-adds are explicit fused ones (fp::fma): one instruction each in the AVX2
// (with FMA) and AVX-512 clones, a third fewer operations on the chain than a multiply and an add,
// and the same bits in every clone and whatever the compiler's contraction setting (the baseline
// clone calls libm's fmaf, exactly rounded too).
#pragma omp declare simd
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  using fp::fma;
  // x = max(x, -87) on the bits: a negative float's bits, read unsigned, grow with its magnitude,
  // so an unsigned min clamps it (-inf too); a float compare would keep GCC from vectorising the
  // loops for AVX2 (it may trap, and only AVX-512 masks it).
  const uint32_t u = f32_bits(x);
  x = f32_from_bits(u > 0xC2AE0000u ? 0xC2AE0000u : u);  // 0xC2AE0000: -87.0f
  // round(x / ln2) lands in the low mantissa bits of 1.5 * 2^23 + x / ln2 (|x / ln2| < 2^22).
  const float shifted = fma(x, 1.44269504f, 12582912.0f);
  const float n = shifted - 12582912.0f;
  const float r = fma(n, 2.12194440e-4f, fma(-n, 0.693359375f, x));  // x - n ln2 (ln2 in two parts)
  float p = 1.9875691500e-4f;
  p = fma(p, r, 1.3981999507e-3f);
  p = fma(p, r, 8.3334519073e-3f);
  p = fma(p, r, 4.1665795894e-2f);
  p = fma(p, r, 1.6666665459e-1f);
  p = fma(p, r, 5.0000001201e-1f);
  p = fma(p, r * r, r) + 1.0f;
  // 2^n from those bits (0x4B400000: 1.5 * 2^23), in unsigned arithmetic: a NaN x (a NaN score)
  // then gives NaN without a float-to-int conversion, which is undefined for NaN.
  return p * f32_from_bits((f32_bits(shifted) - 0x4B400000u + 127u) << 23);
}

}  // namespace dp::kernels::cpu
