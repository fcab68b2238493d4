// models/layers/dropout/dropout_kernels.h against the CPU twin (models/layers/dropout/dropout_ref.h): the same mask for the
// same (seed, stream, element), bit for bit. The keep decision is host-callable and tested here
// for real (the Philox block is base/philox.h, one copy for both: tests/base/test_philox.cpp);
// the kernels skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cuda/dropout_keep.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "models/layers/dropout/dropout_ref.h"
#include "base/half.h"
#include "models/layers/dropout/dropout_kernels.h"
#include "kernels/cuda/layout.h"
#include "tests/kernels/cuda_test_util.h"
#endif

namespace dp::kernels::cuda {
namespace {

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
      const double uu = static_cast<double>(r >> 8) * (1.0 / 16777216.0);  // models/layers/dropout/dropout_ref.cpp
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
  // Typed and channels-last entry points.
  EXPECT_EQ(dropout_forward(DType::F64, nullptr, nullptr, 8, 0.5, 1, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(dropout_forward(DType::BF16, nullptr, nullptr, 8, 1.0, 1, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(dropout_backward(DType::F16, nullptr, nullptr, -1, 0.5, 1, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(dropout_backward(DType::F16, nullptr, nullptr, 0, 0.5, 1, 2, nullptr), cudaSuccess);
  EXPECT_EQ(dropout_forward_nhwc(DType::F32, nullptr, nullptr, -1, 2, 2, 2, 0.5, 1, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(dropout_forward_nhwc(DType::I32, nullptr, nullptr, 1, 2, 2, 2, 0.5, 1, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(dropout_backward_nhwc(DType::BF16, nullptr, nullptr, 0, 2, 2, 2, 0.5, 1, 2, nullptr), cudaSuccess);
  EXPECT_EQ(dropout_backward_nhwc(DType::BF16, nullptr, nullptr, 0, 2, 2, 2, 1.5, 1, 2, nullptr),
            cudaErrorInvalidValue);
}

// 16-bit: the f32 mask (same zeros), kept values round(f32(x) * scale) once.
DP_GPU_TEST(CudaDropoutGpu, SixteenBitDropoutUsesTheF32MaskAndRoundsOnce) {
  dp::cuda::CudaStream stream(0);
  const cudaStream_t s = stream.get();
  const uint64_t seed = test::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 g(seed);
  for (DType dt : {DType::BF16, DType::F16}) {
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{1023}, int64_t{1} << 20}) {
      const double p = 0.3;
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n " << n);
      const uint64_t run_seed = g(), stream_id = g();
      const auto xf = test::normal_floats(n, g);
      std::vector<uint16_t> x(n);
      std::vector<float> xr(n);
      for (int64_t i = 0; i < n; ++i) {
        x[i] = dt == DType::BF16 ? cpu::f32_to_bf16(xf[i]) : cpu::f32_to_f16(xf[i]);
        xr[i] = dt == DType::BF16 ? cpu::bf16_to_f32(x[i]) : cpu::f16_to_f32(x[i]);
      }
      std::vector<float> y32(n);
      cpu::dropout_forward<float>(y32.data(), xr.data(), n, p, run_seed, stream_id);
      test::Guarded<uint16_t> x_(x, s), y_(n, s), dx_(n, s);
      CHECK_CUDA(dropout_forward(dt, y_.get(), x_.get(), n, p, run_seed, stream_id, s));
      CHECK_CUDA(dropout_backward(dt, dx_.get(), x_.get(), n, p, run_seed, stream_id, s));
      const auto y = y_.download(), dx = dx_.download();
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t want = dt == DType::BF16 ? cpu::f32_to_bf16(y32[i]) : cpu::f32_to_f16(y32[i]);
        bad += y[i] != want || dx[i] != want;
      }
      EXPECT_EQ(bad, 0);
      EXPECT_TRUE(y_.guards_intact());
      EXPECT_TRUE(dx_.guards_intact());
    }
  }
}

// Channels last: element (n, c, h, w) gets the mask word of its NCHW index wherever it lies.
DP_GPU_TEST(CudaDropoutGpu, ChannelsLastMasksByTheLogicalNchwIndex) {
  dp::cuda::CudaStream stream(0);
  const cudaStream_t s = stream.get();
  const uint64_t seed = test::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 g(seed);
  struct Shape4 { int64_t N, C, H, W; };
  for (Shape4 sh : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 4, 5}, Shape4{4, 64, 7, 7}, Shape4{3, 5, 1, 9}}) {
    SCOPED_TRACE(testing::Message() << sh.N << "x" << sh.C << "x" << sh.H << "x" << sh.W);
    const int64_t n = sh.N * sh.C * sh.H * sh.W;
    const double p = 0.4;
    const uint64_t run_seed = g(), stream_id = g();
    const auto x = test::normal_floats(n, g);  // logical NCHW order
    std::vector<float> y(n), x_nhwc(n);
    cpu::dropout_forward<float>(y.data(), x.data(), n, p, run_seed, stream_id);
    for (int64_t i = 0; i < n; ++i) x_nhwc[nhwc_offset(i, sh.C, sh.H, sh.W)] = x[i];
    test::Guarded<float> x_(x_nhwc, s), y_(n, s), dx_(n, s);
    CHECK_CUDA(dropout_forward_nhwc(DType::F32, y_.get(), x_.get(), sh.N, sh.C, sh.H, sh.W, p, run_seed, stream_id, s));
    CHECK_CUDA(
        dropout_backward_nhwc(DType::F32, dx_.get(), x_.get(), sh.N, sh.C, sh.H, sh.W, p, run_seed, stream_id, s));
    const auto gy = y_.download(), gdx = dx_.download();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = nhwc_offset(i, sh.C, sh.H, sh.W);
      bad += !test::same_bits(gy[j], y[i]) || !test::same_bits(gdx[j], y[i]);
    }
    EXPECT_EQ(bad, 0);
    EXPECT_TRUE(y_.guards_intact());
    EXPECT_TRUE(dx_.guards_intact());
  }
}

DP_GPU_TEST(CudaDropoutGpu, ForwardAndBackwardEqualTheCpuTwinBitForBit) {
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
