// kernels/cuda/dropout.h against the CPU twin (kernels/cpu/dropout.h): the same mask for the
// same (seed, stream, element), bit for bit. The shared pieces (Philox block, keep decision)
// are host-callable and tested here for real; the kernels skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cuda/philox.h"
#include "runtime/rng.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "kernels/cpu/dropout.h"
#include "kernels/cuda/dropout.h"
#include "tests/kernels/cuda_test_util.h"
#endif

namespace dp::kernels::cuda {
namespace {

TEST(CudaDropout, PhiloxBlockEqualsTheRuntimeRng) {
  std::mt19937_64 g(std::random_device{}());
  for (int t = 0; t < 20000; ++t) {
    const uint64_t key = g(), lo = t < 100 ? t : g(), hi = t % 3 == 0 ? 0 : g();
    uint32_t want[4], got[4];
    Philox::block(key, lo, hi, want);
    philox_block(key, lo, hi, got);
    for (int j = 0; j < 4; ++j) ASSERT_EQ(got[j], want[j]) << "key " << key << " ctr " << hi << ":" << lo;
  }
}

TEST(CudaDropout, IntegerKeepDecisionEqualsTheCpuTwinsDoubleCompare) {
  std::mt19937_64 g(std::random_device{}());
  // p on and between the 2^-24 grid, 0, and the largest p the layer accepts.
  std::vector<double> ps = {0.0, 0.5, 0.25, 0.1, 1.0 / 3, 0.999999, 0x1p-24, 3 * 0x1p-24, 0x1p-25, 1 - 0x1p-24};
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 100; ++i) ps.push_back(u(g));
  for (double p : ps) {
    const uint32_t thr = dropout_keep_threshold(p);
    // Around the threshold, and random words.
    std::vector<uint32_t> rs;
    for (int64_t d = -2; d <= 2; ++d) {
      const int64_t k = static_cast<int64_t>(thr) + d;
      if (k >= 0 && k < (1 << 24)) rs.push_back(static_cast<uint32_t>(k) << 8 | static_cast<uint32_t>(g() & 0xFF));
    }
    for (int i = 0; i < 1000; ++i) rs.push_back(static_cast<uint32_t>(g()));
    for (uint32_t r : rs) {
      const double uu = static_cast<double>(r >> 8) * (1.0 / 16777216.0);  // kernels/cpu/dropout.cpp
      ASSERT_EQ(dropout_keep(r, thr), uu >= p) << "p " << p << " r " << r;
    }
  }
}

#ifdef DPTRAIN_HAVE_CUDA
TEST(CudaDropout, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(dropout_forward(nullptr, nullptr, 8, 1.0, 1, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(dropout_forward(nullptr, nullptr, 8, -0.1, 1, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(dropout_backward(nullptr, nullptr, -1, 0.5, 1, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(dropout_backward(nullptr, nullptr, 0, 0.5, 1, 2, nullptr), cudaSuccess);
}

TEST(CudaDropout, ForwardAndBackwardEqualTheCpuTwinBitForBit) {
  SKIP_WITHOUT_GPU();
  dp::cuda::CudaStream stream(0);
  const cudaStream_t s = stream.get();
  const uint64_t seed = test::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 g(seed);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{1023}, int64_t{1} << 20,
                    (int64_t{1} << 22) + 3}) {
    for (double p : {0.0, 0.1, 0.5, 0.9}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " p " << p);
      const uint64_t run_seed = g(), stream_id = g();
      const auto x = test::normal_floats(n, g), dy = test::normal_floats(n, g);
      std::vector<float> y(n), dx(n);
      cpu::dropout_forward<float>(y.data(), x.data(), n, p, run_seed, stream_id);
      cpu::dropout_backward<float>(dx.data(), dy.data(), n, p, run_seed, stream_id);
      test::Guarded<float> x_(x, s), dy_(dy, s), y_(n, s), dx_(n, s);
      CHECK_CUDA(dropout_forward(y_.get(), x_.get(), n, p, run_seed, stream_id, s));
      CHECK_CUDA(dropout_backward(dx_.get(), dy_.get(), n, p, run_seed, stream_id, s));
      const auto gy = y_.download(), gdx = dx_.download();
      int64_t bad = 0, kept = 0;
      for (int64_t i = 0; i < n; ++i) {
        bad += !test::same_bits(gy[i], y[i]) || !test::same_bits(gdx[i], dx[i]);
        kept += y[i] != 0.0f;
      }
      EXPECT_EQ(bad, 0);
      EXPECT_TRUE(y_.guards_intact());
      EXPECT_TRUE(dx_.guards_intact());
      if (n >= (1 << 20)) {  // the mask is not degenerate
        EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.01);
      }
    }
  }
}
#endif

}  // namespace
}  // namespace dp::kernels::cuda
