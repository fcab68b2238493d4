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

TEST_F(CudaElementwiseGpu, ReluForwardAndBackwardEqualTheCpu) {
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

TEST_F(CudaElementwiseGpu, AddAddInplaceScaleAndDivideEqualTheCpu) {
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

TEST_F(CudaElementwiseGpu, BiasAddEqualsTheLinearAndConvBiasLoops) {
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

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaElementwise, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
