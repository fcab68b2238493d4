// defines: array conversions between f32 and the 16-bit floats (raw bits, as Tensor holds them),
// the CPU twins of kernels/cuda/cast.h; round to nearest even, with subnormals (base/half.h).
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// y (n) = x rounded to bf16 / f16; y (n) = x widened to f32 (exact).
void f32_to_bf16(uint16_t* y, const float* x, int64_t n);
void bf16_to_f32(float* y, const uint16_t* x, int64_t n);
void f32_to_f16(uint16_t* y, const float* x, int64_t n);
void f16_to_f32(float* y, const uint16_t* x, int64_t n);

}  // namespace dp::kernels::cpu
