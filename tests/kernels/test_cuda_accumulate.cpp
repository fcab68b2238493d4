// kernels/cuda/accumulate.h against its CPU twin (base/half.h's conversions and a float
// add): a 16-bit gradient widened into an fp32 master gradient, and 16-bit gradients summed in
// f32 then rounded to nearest even, bit for bit, with guard regions; skips without a GPU.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>

#include "base/half.h"
#include "kernels/cuda/accumulate.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaAccumulate, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(widen_accumulate(nullptr, nullptr, -1, true, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(widen_accumulate(nullptr, nullptr, 4, true, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(add_inplace_16(nullptr, nullptr, 0, false, nullptr), cudaSuccess);
}

class CudaAccumulateGpu : public test::GpuTest {};

DP_GPU_TEST_F(CudaAccumulateGpu, EqualsTheCpuTwinBitForBit) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  std::normal_distribution<float> nd(0.f, 3.f);
  for (bool bf : {true, false}) {
    for (int64_t n : {1, 255, 256, 257, 100003}) {
      std::vector<float> y(n);
      std::vector<uint16_t> a(n), b(n);
      auto narrow = [&](float v) { return bf ? cpu::f32_to_bf16(v) : cpu::f32_to_f16(v); };
      auto widen = [&](uint16_t v) { return bf ? cpu::bf16_to_f32(v) : cpu::f16_to_f32(v); };
      for (int64_t i = 0; i < n; ++i) y[i] = nd(gen_), a[i] = narrow(nd(gen_)), b[i] = narrow(nd(gen_));
      test::Guarded<float> y_(y, s);
      test::Guarded<uint16_t> a_(a, s), b_(b, s);
      CHECK_CUDA(widen_accumulate(y_.get(), a_.get(), n, bf, s));
      CHECK_CUDA(add_inplace_16(a_.get(), b_.get(), n, bf, s));
      const auto y2 = y_.download();
      const auto a2 = a_.download();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(test::same_bits(y2[i], y[i] + widen(a[i]))) << (bf ? "bf16 " : "f16 ") << n << " at " << i;
        ASSERT_EQ(a2[i], narrow(widen(a[i]) + widen(b[i]))) << (bf ? "bf16 " : "f16 ") << n << " at " << i;
      }
      EXPECT_TRUE(y_.guards_intact());
      EXPECT_TRUE(a_.guards_intact());
    }
  }
}

}  // namespace
}  // namespace dp::kernels::cuda
#endif  // DPTRAIN_HAVE_CUDA
