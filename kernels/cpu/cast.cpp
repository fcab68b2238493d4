#include "kernels/cpu/cast.h"

#include "base/half.h"

namespace dp::kernels::cpu {
namespace {

template <typename To, typename From, To (*convert)(From)>
void convert_n(To* y, const From* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) y[i] = convert(x[i]);
}

}  // namespace

void f32_to_bf16(uint16_t* y, const float* x, int64_t n) { convert_n<uint16_t, float, f32_to_bf16>(y, x, n); }
void bf16_to_f32(float* y, const uint16_t* x, int64_t n) { convert_n<float, uint16_t, bf16_to_f32>(y, x, n); }
void f32_to_f16(uint16_t* y, const float* x, int64_t n) { convert_n<uint16_t, float, f32_to_f16>(y, x, n); }
void f16_to_f32(float* y, const uint16_t* x, int64_t n) { convert_n<float, uint16_t, f16_to_f32>(y, x, n); }

}  // namespace dp::kernels::cpu
