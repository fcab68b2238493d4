// kernels/cuda/elementwise.h against the CPU twins (kernels/cpu/elementwise.h, reduce.h's
// divide, linear_forward's bias loop), on fresh random inputs: each element is one IEEE
// operation or a select, so the tolerance is none (same bits; a NaN only has to be a NaN). Guard regions around every
// output catch out-of-bounds writes. GPU tests skip without a GPU; argument checks and the
// launch shape run everywhere.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>
#include <limits>

#include "kernels/cpu/elementwise.h"
#include "base/half.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.cuh"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

using test::Guarded;

// Sizes around the block size and the grid cap, odd ones included.
const int64_t kSizes[] = {1, 3, 255, 256, 257, 100003, (int64_t{1} << 24) + 5};

TEST(CudaElementwise, ArgumentsAreCheckedBeforeAnyLaunch) {
  // No device needed: these return before touching CUDA.
  EXPECT_EQ(relu_forward(nullptr, nullptr, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(relu_forward(nullptr, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(relu_backward(nullptr, nullptr, nullptr, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(add(nullptr, nullptr, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(add_inplace(nullptr, nullptr, -5, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(scale(nullptr, nullptr, 2.0f, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(divide(nullptr, 10, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(divide(nullptr, 0, 3, nullptr), cudaSuccess);
  EXPECT_EQ(bias_add(nullptr, nullptr, 4, -1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(bias_add(nullptr, nullptr, 0, 3, 5, nullptr), cudaSuccess);
  // Typed entry points: f32, bf16 and f16 only.
  EXPECT_TRUE(elementwise_dtype_supported(DType::F32));
  EXPECT_TRUE(elementwise_dtype_supported(DType::BF16));
  EXPECT_TRUE(elementwise_dtype_supported(DType::F16));
  EXPECT_FALSE(elementwise_dtype_supported(DType::F64));
  EXPECT_FALSE(elementwise_dtype_supported(DType::I32));
  EXPECT_EQ(relu_forward(DType::F64, nullptr, nullptr, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(relu_forward(DType::BF16, nullptr, nullptr, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(relu_forward(DType::BF16, nullptr, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(relu_backward(DType::I64, nullptr, nullptr, nullptr, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(relu_backward(DType::F16, nullptr, nullptr, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(add(DType::U8, nullptr, nullptr, nullptr, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(add(DType::F16, nullptr, nullptr, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(add_inplace(DType::BF16, nullptr, nullptr, -2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(bias_add(DType::F64, nullptr, nullptr, 2, 3, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(bias_add(DType::BF16, nullptr, nullptr, 2, -3, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(bias_add(DType::F16, nullptr, nullptr, 0, 3, 1, nullptr), cudaSuccess);
  EXPECT_EQ(bias_grad(DType::F32, nullptr, nullptr, -1, 3, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(bias_grad(DType::F64, nullptr, nullptr, 2, 3, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(bias_grad(DType::BF16, nullptr, nullptr, 2, 0, 1, nullptr), cudaSuccess);
}

TEST(CudaElementwise, GridCoversSmallSizesAndCapsLargeOnes) {
  EXPECT_EQ(grid_1d(0), 1u);
  EXPECT_EQ(grid_1d(1), 1u);
  EXPECT_EQ(grid_1d(256), 1u);
  EXPECT_EQ(grid_1d(257), 2u);
  EXPECT_EQ(grid_1d(int64_t{1} << 40), 65536u);
  EXPECT_EQ(grid_1d(9, 4), 3u);
}

class CudaElementwiseGpu : public test::GpuTest {};

// Random normals with the edge cases the CPU twin documents: NaN passes ReLU, -0 is not < 0.
std::vector<float> with_specials(std::vector<float> v) {
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min()};
  for (size_t i = 0; i < v.size() && i < std::size(specials); ++i) v[i * 7 % v.size()] = specials[i];
  return v;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // Arithmetic on a NaN gives the GPU's canonical NaN, the CPU's keeps the operand's payload.
    if (test::same_bits(got[i], want[i]) || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    if (bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

DP_GPU_TEST_F(CudaElementwiseGpu, ReluForwardAndBackwardEqualTheCpu) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (int64_t n : kSizes) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const auto x = with_specials(test::normal_floats(n, gen_));
    const auto dy = test::normal_floats(n, gen_);
    std::vector<float> y(n), dx(n);
    cpu::relu_forward(y.data(), x.data(), n);
    cpu::relu_backward(dx.data(), dy.data(), y.data(), n);
    Guarded<float> dx_(x, s()), dy_(dy, s()), y_(n, s()), dxo_(n, s());
    CHECK_CUDA(relu_forward(y_.get(), dx_.get(), n, s()));
    CHECK_CUDA(relu_backward(dxo_.get(), dy_.get(), y_.get(), n, s()));
    expect_same_bits(y_.download(), y, "relu y");
    expect_same_bits(dxo_.download(), dx, "relu dx");
    EXPECT_TRUE(y_.guards_intact());
    EXPECT_TRUE(dxo_.guards_intact());
    CHECK_CUDA(relu_forward(dx_.get(), dx_.get(), n, s()));  // in place
    expect_same_bits(dx_.download(), y, "relu in place");
  }
}

DP_GPU_TEST_F(CudaElementwiseGpu, AddAddInplaceScaleAndDivideEqualTheCpu) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (int64_t n : kSizes) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const auto a = with_specials(test::normal_floats(n, gen_));
    const auto b = test::normal_floats(n, gen_, 3.0f);
    std::vector<float> sum(n);
    cpu::add(sum.data(), a.data(), b.data(), n);
    Guarded<float> a_(a, s()), b_(b, s()), y_(n, s());
    CHECK_CUDA(add(y_.get(), a_.get(), b_.get(), n, s()));
    expect_same_bits(y_.download(), sum, "add");
    EXPECT_TRUE(y_.guards_intact());

    std::vector<float> acc = a;
    cpu::add_inplace(acc.data(), b.data(), n);
    CHECK_CUDA(add_inplace(a_.get(), b_.get(), n, s()));
    expect_same_bits(a_.download(), acc, "add_inplace");
    EXPECT_TRUE(a_.guards_intact());

    const float alpha = 0.37f;
    std::vector<float> scaled(n);
    cpu::scale(scaled.data(), b.data(), alpha, n);
    CHECK_CUDA(scale(y_.get(), b_.get(), alpha, n, s()));
    expect_same_bits(y_.download(), scaled, "scale");

    std::vector<float> q = b;
    cpu::divide(DType::F32, q.data(), n, 3);
    CHECK_CUDA(divide(b_.get(), n, 3, s()));
    expect_same_bits(b_.download(), q, "divide");
    EXPECT_TRUE(b_.guards_intact());
  }
}

DP_GPU_TEST_F(CudaElementwiseGpu, BiasAddEqualsTheLinearAndConvBiasLoops) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  struct Case { int64_t outer, channels, inner; };
  for (Case c : {Case{1, 1, 1}, Case{7, 10, 1}, Case{256, 1000, 1}, Case{3, 64, 49}, Case{32, 17, 1025}}) {
    SCOPED_TRACE(testing::Message() << c.outer << "x" << c.channels << "x" << c.inner);
    const int64_t n = c.outer * c.channels * c.inner;
    const auto y0 = test::normal_floats(n, gen_);
    const auto bias = test::normal_floats(c.channels, gen_);
    std::vector<float> want = y0;
    for (int64_t o = 0; o < c.outer; ++o)
      for (int64_t ch = 0; ch < c.channels; ++ch)
        for (int64_t i = 0; i < c.inner; ++i) want[(o * c.channels + ch) * c.inner + i] += bias[ch];
    Guarded<float> y_(y0, s()), b_(bias, s());
    CHECK_CUDA(bias_add(y_.get(), b_.get(), c.outer, c.channels, c.inner, s()));
    expect_same_bits(y_.download(), want, "bias_add");
    EXPECT_TRUE(y_.guards_intact());
    EXPECT_TRUE(b_.guards_intact());
  }
}

// 16-bit values as raw bits: f32 rounded to dtype, and back.
uint16_t to16(float f, DType dt) { return dt == DType::BF16 ? cpu::f32_to_bf16(f) : cpu::f32_to_f16(f); }
float from16(uint16_t h, DType dt) { return dt == DType::BF16 ? cpu::bf16_to_f32(h) : cpu::f16_to_f32(h); }
std::vector<uint16_t> to16(const std::vector<float>& v, DType dt) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to16(v[i], dt);
  return out;
}

void expect_same_16(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want, DType dt, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = from16(got[i], dt), w = from16(want[i], dt);
    if (got[i] == want[i] || (std::isnan(g) && std::isnan(w))) continue;
    if (bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: got " << g << ", want " << w;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

DP_GPU_TEST_F(CudaElementwiseGpu, TypedF32EntriesRunTheF32Kernels) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const int64_t n = 100003;
  const auto a = with_specials(test::normal_floats(n, gen_)), b = test::normal_floats(n, gen_);
  Guarded<float> a_(a, s()), b_(b, s()), y1(n, s()), y2(n, s());
  CHECK_CUDA(relu_forward(y1.get(), a_.get(), n, s()));
  CHECK_CUDA(relu_forward(DType::F32, y2.get(), a_.get(), n, s()));
  expect_same_bits(y2.download(), y1.download(), "typed relu");
  CHECK_CUDA(relu_backward(y1.get(), b_.get(), a_.get(), n, s()));
  CHECK_CUDA(relu_backward(DType::F32, y2.get(), b_.get(), a_.get(), n, s()));
  expect_same_bits(y2.download(), y1.download(), "typed relu backward");
  CHECK_CUDA(add(y1.get(), a_.get(), b_.get(), n, s()));
  CHECK_CUDA(add(DType::F32, y2.get(), a_.get(), b_.get(), n, s()));
  expect_same_bits(y2.download(), y1.download(), "typed add");
  EXPECT_TRUE(y2.guards_intact());
}

DP_GPU_TEST_F(CudaElementwiseGpu, SixteenBitReluAndAddRoundOnce) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (DType dt : {DType::BF16, DType::F16}) {
    for (int64_t n : {int64_t{1}, int64_t{257}, int64_t{100003}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n " << n);
      const auto a = to16(with_specials(test::normal_floats(n, gen_)), dt);
      const auto b = to16(test::normal_floats(n, gen_, 3.0f), dt);
      std::vector<uint16_t> relu(n), drelu(n), sum(n);
      for (int64_t i = 0; i < n; ++i) {
        const float av = from16(a[i], dt), bv = from16(b[i], dt);
        relu[i] = av < 0.0f ? to16(0.0f, dt) : a[i];
        drelu[i] = from16(relu[i], dt) > 0.0f ? b[i] : to16(0.0f, dt);
        sum[i] = to16(av + bv, dt);
      }
      Guarded<uint16_t> a_(a, s()), b_(b, s()), y_(n, s()), dx_(n, s());
      CHECK_CUDA(relu_forward(dt, y_.get(), a_.get(), n, s()));
      CHECK_CUDA(relu_backward(dt, dx_.get(), b_.get(), y_.get(), n, s()));
      expect_same_16(y_.download(), relu, dt, "relu");
      expect_same_16(dx_.download(), drelu, dt, "relu backward");
      CHECK_CUDA(add(dt, y_.get(), a_.get(), b_.get(), n, s()));
      expect_same_16(y_.download(), sum, dt, "add");
      CHECK_CUDA(add_inplace(dt, a_.get(), b_.get(), n, s()));
      expect_same_16(a_.download(), sum, dt, "add_inplace");
      EXPECT_TRUE(y_.guards_intact());
      EXPECT_TRUE(dx_.guards_intact());
      EXPECT_TRUE(a_.guards_intact());
    }
  }
}

DP_GPU_TEST_F(CudaElementwiseGpu, TypedBiasAddRoundsOnce) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (DType dt : {DType::BF16, DType::F16}) {
    const int64_t outer = 33, channels = 70, inner = 5, n = outer * channels * inner;
    const auto y0 = to16(test::normal_floats(n, gen_), dt), b = to16(test::normal_floats(channels, gen_), dt);
    std::vector<uint16_t> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = to16(from16(y0[i], dt) + from16(b[(i / inner) % channels], dt), dt);
    Guarded<uint16_t> y_(y0, s()), b_(b, s());
    CHECK_CUDA(bias_add(dt, y_.get(), b_.get(), outer, channels, inner, s()));
    expect_same_16(y_.download(), want, dt, "bias_add");
    EXPECT_TRUE(y_.guards_intact());
  }
  // F32 through the typed entry equals the f32 one.
  const auto y0 = test::normal_floats(1000, gen_), b = test::normal_floats(10, gen_);
  Guarded<float> y1(y0, s()), y2(y0, s()), b_(b, s());
  CHECK_CUDA(bias_add(y1.get(), b_.get(), 100, 10, 1, s()));
  CHECK_CUDA(bias_add(DType::F32, y2.get(), b_.get(), 100, 10, 1, s()));
  expect_same_bits(y2.download(), y1.download(), "typed f32 bias_add");
}

// db += sums over (outer, inner): against double sums, within the f32 summation's rounding and
// one final rounding to the dtype.
DP_GPU_TEST_F(CudaElementwiseGpu, BiasGradAccumulatesChannelSums) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  struct Case { int64_t outer, channels, inner; };
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (Case c : {Case{1, 1, 1}, Case{7, 10, 1}, Case{256, 1000, 1}, Case{3, 64, 49}, Case{32, 17, 1025},
                   Case{0, 5, 1}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " " << c.outer << "x" << c.channels << "x" << c.inner);
      const int64_t n = c.outer * c.channels * c.inner;
      auto dy = test::normal_floats(n, gen_), db0 = test::normal_floats(c.channels, gen_);
      if (dt != DType::F32) {
        for (auto& v : dy) v = from16(to16(v, dt), dt);
        for (auto& v : db0) v = from16(to16(v, dt), dt);
      }
      std::vector<double> want(c.channels), mag(c.channels);
      for (int64_t ch = 0; ch < c.channels; ++ch) want[ch] = db0[ch], mag[ch] = std::fabs(db0[ch]);
      for (int64_t o = 0; o < c.outer; ++o)
        for (int64_t ch = 0; ch < c.channels; ++ch)
          for (int64_t i = 0; i < c.inner; ++i) {
            const double v = dy[(o * c.channels + ch) * c.inner + i];
            want[ch] += v;
            mag[ch] += std::fabs(v);
          }
      const double rel = dt == DType::F32 ? 1e-5 : dt == DType::BF16 ? 8e-3 : 1e-3;
      std::vector<double> got(c.channels);
      if (dt == DType::F32) {
        Guarded<float> dy_(dy, s()), db_(db0, s());
        CHECK_CUDA(bias_grad(dt, db_.get(), dy_.get(), c.outer, c.channels, c.inner, s()));
        const auto g = db_.download();
        for (int64_t ch = 0; ch < c.channels; ++ch) got[ch] = g[ch];
        EXPECT_TRUE(db_.guards_intact());
      } else {
        Guarded<uint16_t> dy_(to16(dy, dt), s()), db_(to16(db0, dt), s());
        CHECK_CUDA(bias_grad(dt, db_.get(), dy_.get(), c.outer, c.channels, c.inner, s()));
        const auto g = db_.download();
        for (int64_t ch = 0; ch < c.channels; ++ch) got[ch] = from16(g[ch], dt);
        EXPECT_TRUE(db_.guards_intact());
      }
      for (int64_t ch = 0; ch < c.channels; ++ch)
        ASSERT_NEAR(got[ch], want[ch], rel * mag[ch] + 1e-30) << "channel " << ch;
    }
}

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaElementwise, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
