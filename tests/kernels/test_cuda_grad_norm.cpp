// kernels/cuda/grad_norm.h against its CPU twin (kernels/cpu/grad_norm.h): the global gradient
// norm's sum of squares in the one order of kernels/grad_norm_math.h, bit for bit, for sizes
// around the chunk and the second pass's width; and the clip, which reads the sum on the device.
// On the CUDA emulator in CI (shared-memory racecheck on the fold).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tests/gpu_test.h"
#include "kernels/cpu/grad_norm.h"
#include "kernels/grad_norm_math.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "kernels/cuda/grad_norm.h"
#include "tests/kernels/cuda_test_util.h"
#endif

namespace dp::kernels::cuda {
namespace {

TEST(CudaGradNormMath, TheCpuTwinSumsSquaresAndClipsAsTorch) {
  std::vector<float> x = {3.0f, -4.0f};
  EXPECT_EQ(cpu::sum_of_squares(x.data(), 2), 25.0);
  EXPECT_EQ(cpu::sum_of_squares(x.data(), 0), 0.0);
  EXPECT_EQ(clip_coefficient(25.0, 10.0), 1.0f);                               // below the bound: untouched
  EXPECT_EQ(clip_coefficient(25.0, 1.0), static_cast<float>(1.0 / (5.0 + 1e-6)));  // torch's max_norm / (norm + 1e-6)
  cpu::clip_by_norm(x.data(), 2, 25.0, 1.0);
  EXPECT_EQ(x[0], 3.0f * static_cast<float>(1.0 / (5.0 + 1e-6)));
  // A long sum against long double: the order only moves the last bits.
  std::vector<float> y(300001);
  std::mt19937_64 g(7);
  std::normal_distribution<float> d;
  long double ref = 0;
  for (auto& v : y) v = d(g), ref += static_cast<long double>(v) * v;
  EXPECT_NEAR(cpu::sum_of_squares(y.data(), static_cast<int64_t>(y.size())), static_cast<double>(ref), 1e-10 * ref);
}

#ifdef DPTRAIN_HAVE_CUDA
TEST(CudaGradNorm, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(sum_of_squares(nullptr, -1, nullptr, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(clip_by_norm(nullptr, -1, nullptr, 1.0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(clip_by_norm(nullptr, 5, nullptr, 0.0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(clip_by_norm(nullptr, 0, nullptr, 1.0, nullptr), cudaSuccess);
  EXPECT_EQ(sum_of_squares_scratch(0), 1);
  EXPECT_EQ(sum_of_squares_scratch(kNormChunk + 1), 2);
}

class CudaGradNormGpu : public test::GpuTest {};

DP_GPU_TEST_F(CudaGradNormGpu, SumAndClipEqualTheCpuTwinBitForBit) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  // Empty, one element, around one chunk, and more chunks than the second pass has threads.
  for (int64_t n : {int64_t{0}, int64_t{1}, kNormChunk - 1, kNormChunk + 1, kNormChunk * (kNormThreads + 3) + 5}) {
    auto x = test::normal_floats(static_cast<size_t>(n), gen_, 0.3f);
    const double want = cpu::sum_of_squares(x.data(), n);
    test::Guarded<float> x_(x, s);
    test::Guarded<double> partial_(static_cast<size_t>(sum_of_squares_scratch(n)), s), sum_(1, s);
    CHECK_CUDA(sum_of_squares(x_.get(), n, partial_.get(), sum_.get(), s));
    const double got = sum_.download()[0];
    EXPECT_EQ(std::memcmp(&got, &want, sizeof(double)), 0) << n << ": " << got << " vs " << want;
    // Clip to a third of the norm: every element scaled by the same float coefficient.
    const double max_norm = std::sqrt(want) / 3.0 + 1e-30;
    cpu::clip_by_norm(x.data(), n, want, max_norm);
    CHECK_CUDA(clip_by_norm(x_.get(), n, sum_.get(), max_norm, s));
    const auto clipped = x_.download();
    for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(test::same_bits(clipped[i], x[i])) << n << " " << i;
    EXPECT_TRUE(x_.guards_intact() && partial_.guards_intact() && sum_.guards_intact());
  }
}
#endif

}  // namespace
}  // namespace dp::kernels::cuda
