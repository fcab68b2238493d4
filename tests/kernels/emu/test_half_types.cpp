// __half and __nv_bfloat16 of the emulation build: round to nearest even as the CPU twins do,
// NaN canonical (0x7FFF) as a GPU's conversions make it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/half.h"

namespace dp::emu::test {
namespace {

TEST(EmuHalf, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to the even, 1.
  EXPECT_EQ(__half_as_ushort(__float2half_rn(1.0f + 0x1p-11f)), 0x3C00);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(1.0f + 3 * 0x1p-11f)), 0x3C02);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(65520.0f)), 0x7C00);  // rounds past the largest half: inf
  EXPECT_EQ(__half_as_ushort(__float2half_rn(0x1p-24f)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(1.0f + 0x1p-8f)), 0x3F80);
  EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(1.0f + 3 * 0x1p-8f)), 0x3F82);
  EXPECT_EQ(__half2float(__ushort_as_half(0xC000)), -2.0f);
  EXPECT_EQ(__bfloat162float(__ushort_as_bfloat16(0x4049)), 3.140625f);
}

TEST(EmuHalf, AgreesWithTheCpuTwinsOnEveryHalfAndManyFloats) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = __half2float(__ushort_as_half(static_cast<uint16_t>(h)));
    if (std::isnan(f)) continue;
    ASSERT_EQ(__half_as_ushort(__float2half_rn(f)), h);
    ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(f)), dp::kernels::cpu::f32_to_bf16(f)) << f;
  }
  for (uint32_t u = 0; u < 0xFFFFFFFFu - 9973; u += 9973) {  // a stride through all float bit patterns
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(__half_as_ushort(__float2half_rn(f)), dp::kernels::cpu::f32_to_f16(f)) << u;
    ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(f)), dp::kernels::cpu::f32_to_bf16(f)) << u;
  }
}

TEST(EmuHalf, NanBecomesTheGpusCanonicalNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(__half_as_ushort(__float2half_rn(nan)), 0x7FFF);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(-nan)), 0x7FFF);
  EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(nan)), 0x7FFF);
  EXPECT_TRUE(__hisnan(__float2half_rn(nan)));
}

TEST(EmuHalf, ImplicitConversionsGoThroughFloat) {
  const __half h = 2.5f;
  const __nv_bfloat16 b = -0.75f;
  EXPECT_EQ(static_cast<float>(h), 2.5f);
  EXPECT_EQ(static_cast<float>(b), -0.75f);
  const half sum = h + 1.0f;
  EXPECT_EQ(__half_as_ushort(sum), __half_as_ushort(__float2half_rn(3.5f)));
}

}  // namespace
}  // namespace dp::emu::test
