#include "models/layers/gelu/gelu_tanh_f32.h"

#include <algorithm>

#include "base/half.h"
#include "kernels/cpu/exp_nonpositive.h"
#include "kernels/host_device.h"

namespace dp::kernels::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;

// s = sigmoid(2u) and 1 - s for one element, branch-free (selects on the bits: a float compare
// would keep GCC from vectorising for AVX2, see exp_nonpositive).
struct Sigmoid {
  float s, one_minus_s;
};
[[gnu::always_inline]] inline Sigmoid sigmoid_2u(float u) {
  const uint32_t ub = f32_bits(u);
  const float e = exp_nonpositive(-2.0f * f32_from_bits(ub & 0x7FFFFFFFu));  // e^(-2|u|), in (0, 1]
  const float inv = 1.0f / (1.0f + e), small = e * inv;
  const uint32_t negative = static_cast<uint32_t>(static_cast<int32_t>(ub) >> 31);  // all ones for u < 0
  const uint32_t ib = f32_bits(inv), sb = f32_bits(small);
  return {f32_from_bits((ib & ~negative) | (sb & negative)), f32_from_bits((sb & ~negative) | (ib & negative))};
}

// u = sqrt(2/pi) (v + 0.044715 v^3), v2 = v^2; the multiply-adds fused (fp::fma, as in
// exp_nonpositive): the same bits on every clone, one instruction each on AVX2 and AVX-512.
[[gnu::always_inline]] inline float inner(float v, float v2) { return kSqrt2OverPi * fp::fma(kCubic * v2, v, v); }

[[gnu::always_inline]] inline void forward_body(float* y, const float* x, int64_t n) {
  // simd: y may alias x; each element is read before it is written, so no check for overlap.
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v * sigmoid_2u(inner(v, v * v)).s;
  }
}
DP_VECTOR_CLONES(void, forward, (float* y, const float* x, int64_t n), (y, x, n))

[[gnu::always_inline]] inline void backward_body(float* dx, const float* dy, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i], v2 = v * v;
    const Sigmoid g = sigmoid_2u(inner(v, v2));
    const float du = kSqrt2OverPi * fp::fma(3.0f * kCubic, v2, 1.0f);
    dx[i] = dy[i] * fp::fma(2.0f * v * g.s * g.one_minus_s, du, g.s);
  }
}
DP_VECTOR_CLONES(void, backward, (float* dx, const float* dy, const float* x, int64_t n), (dx, dy, x, n))

constexpr int64_t kChunk = 1 << 14;  // elements per task; element-wise, so any split gives the same bits

}  // namespace

void gelu_tanh_f32_forward(float* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 2 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk) forward(y + c, x + c, std::min(kChunk, n - c));
}

void gelu_tanh_f32_backward(float* dx, const float* dy, const float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 2 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk) backward(dx + c, dy + c, x + c, std::min(kChunk, n - c));
}

void gelu_tanh_f32_forward_on(CloneIsa isa, float* y, const float* x, int64_t n) { forward_clone(isa)(y, x, n); }
void gelu_tanh_f32_backward_on(CloneIsa isa, float* dx, const float* dy, const float* x, int64_t n) {
  backward_clone(isa)(dx, dy, x, n);
}

}  // namespace dp::kernels::cpu
