// defines: helpers of the CUDA tests of kernels that take f32/bf16/f16 activations in NCHW or
// NHWC (test_cuda_batchnorm.cpp, test_cuda_global_avgpool.cpp): values rounded through a dtype,
// and logical (N, C, HW) values encoded to / decoded from a dtype's bytes in either layout.
// Host-only (no CUDA calls), so it builds in every configuration.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/half.h"
#include "base/dtype.h"

namespace dp::kernels::cuda::test {

// v rounded to the nearest value of dtype (F32, BF16, F16), as a float.
inline float round_to(float v, DType dtype) {
  if (dtype == DType::BF16) return cpu::bf16_to_f32(cpu::f32_to_bf16(v));
  if (dtype == DType::F16) return cpu::f16_to_f32(cpu::f32_to_f16(v));
  return v;
}

// Memory index of logical element (n, c, i) of an (N, C, HW) batch.
inline int64_t layout_index(int64_t n, int64_t c, int64_t i, int64_t C, int64_t HW, bool nhwc) {
  return nhwc ? (n * HW + i) * C + c : (n * C + c) * HW + i;
}

// Logical NCHW values (N * C * HW) -> the bytes of `dtype` in the layout.
inline std::vector<uint8_t> encode(const std::vector<float>& v, DType dtype, int64_t N, int64_t C, int64_t HW,
                                   bool nhwc) {
  const size_t es = dtype_size(dtype);
  std::vector<uint8_t> out(v.size() * es);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i) {
        const float f = v[(n * C + c) * HW + i];
        uint8_t* p = &out[layout_index(n, c, i, C, HW, nhwc) * es];
        if (dtype == DType::F32) {
          std::memcpy(p, &f, 4);
        } else {
          const uint16_t h = dtype == DType::BF16 ? cpu::f32_to_bf16(f) : cpu::f32_to_f16(f);
          std::memcpy(p, &h, 2);
        }
      }
  return out;
}

// The inverse: bytes of `dtype` in the layout -> logical NCHW floats.
inline std::vector<float> decode(const std::vector<uint8_t>& b, DType dtype, int64_t N, int64_t C, int64_t HW,
                                 bool nhwc) {
  const size_t es = dtype_size(dtype);
  std::vector<float> out(static_cast<size_t>(N * C * HW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i) {
        const uint8_t* p = &b[layout_index(n, c, i, C, HW, nhwc) * es];
        float f;
        if (dtype == DType::F32) {
          std::memcpy(&f, p, 4);
        } else {
          uint16_t h;
          std::memcpy(&h, p, 2);
          f = dtype == DType::BF16 ? cpu::bf16_to_f32(h) : cpu::f16_to_f32(h);
        }
        out[(n * C + c) * HW + i] = f;
      }
  return out;
}

// The relative rounding unit of dtype's significand (half an ulp at 1).
inline double unit_roundoff(DType dtype) {
  return dtype == DType::BF16 ? 1.0 / 256 : dtype == DType::F16 ? 1.0 / 2048 : 1.0 / (1 << 24);
}

// The absolute rounding error below dtype's normal range, where unit_roundoff's relative bound
// fails: half the spacing of its subnormals (f16: 2^-25, as values under 2^-14 are multiples of
// 2^-24; bf16: 2^-134; f32: 2^-150). Rounding to dtype errs by at most
// unit_roundoff * |v| + subnormal_half_spacing.
inline double subnormal_half_spacing(DType dtype) {
  return dtype == DType::BF16 ? 0x1p-134 : dtype == DType::F16 ? 0x1p-25 : 0x1p-150;
}

}  // namespace dp::kernels::cuda::test
