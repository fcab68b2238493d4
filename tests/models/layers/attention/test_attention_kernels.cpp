// models/layers/attention/attention_kernels.h against the CPU twin (attention_ref.h, sums in
// f64), without and with attention dropout (the same Philox mask at the same logical indices).
// The kernel sums in f32: each output is a sum of at most T products of O(1) terms (q, k, v, datt
// ~ N(0, 1), probabilities <= 1), so its error is ~T u times the sum of the terms' magnitudes
// (u = 2^-24), below 1e-5 for these shapes (T <= 16, D = 8). Asserted:
//   P, att, dqkv:  |gpu - cpu| <= 1e-5 * (1 + |cpu|)        (dropout scales by 1 / (1 - p) <= 1.25)
// and P exactly 0 above the diagonal. Guard regions catch out-of-bounds writes.
#include <gtest/gtest.h>

#include "tests/gpu_test.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>

#include "models/layers/attention/attention_kernels.h"
#include "models/layers/attention/attention_ref.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaAttention, ArgumentsAreCheckedBeforeAnyLaunch) {
  const cpu::AttnDropout none, bad{1.0, 0, 0};
  EXPECT_EQ(attention_forward(nullptr, nullptr, nullptr, -1, 4, 2, 8, none, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(attention_forward(nullptr, nullptr, nullptr, 2, 4, 0, 8, none, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(attention_forward(nullptr, nullptr, nullptr, 2, 4, 2, 8, bad, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, 2, 4, 2, 0, none, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, 0, 4, 2, 8, none, nullptr), cudaSuccess);
}

class CudaAttentionGpu : public test::GpuTest {};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 * (1 + std::fabs(want[i]))) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << want[i];
}

DP_GPU_TEST_F(CudaAttentionGpu, ForwardAndBackwardMatchTheCpuTwin) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  struct Case { int64_t N, T, H, D; double p; };
  for (Case c : {Case{1, 1, 1, 1, 0}, Case{2, 8, 2, 8, 0}, Case{2, 16, 2, 8, 0}, Case{1, 12, 3, 4, 0.2}}) {
    SCOPED_TRACE(testing::Message() << "N " << c.N << " T " << c.T << " H " << c.H << " D " << c.D << " p " << c.p);
    const cpu::AttnDropout drop{c.p, gen_(), gen_() % 16};
    const int64_t C = c.H * c.D;
    const auto qkv = test::normal_floats(c.N * c.T * 3 * C, gen_), datt = test::normal_floats(c.N * c.T * C, gen_);
    std::vector<float> att(c.N * c.T * C), P(c.N * c.H * c.T * c.T), dqkv(qkv.size());
    cpu::attention_forward(att.data(), P.data(), qkv.data(), c.N, c.T, c.H, c.D, drop);
    cpu::attention_backward(dqkv.data(), datt.data(), qkv.data(), P.data(), c.N, c.T, c.H, c.D, drop);

    test::Guarded<float> qkv_(qkv, s), datt_(datt, s), att_(att.size(), s), P_(P.size(), s), dqkv_(qkv.size(), s),
        dot_(c.N * c.H * c.T, s);
    CHECK_CUDA(attention_forward(att_.get(), P_.get(), qkv_.get(), c.N, c.T, c.H, c.D, drop, s));
    CHECK_CUDA(attention_backward(dqkv_.get(), dot_.get(), datt_.get(), qkv_.get(), P_.get(), c.N, c.T, c.H, c.D,
                                  drop, s));
    const auto gP = P_.download();
    expect_close(gP, P, "P");
    for (int64_t r = 0; r < c.N * c.H * c.T; ++r)
      for (int64_t j = r % c.T + 1; j < c.T; ++j) ASSERT_EQ(gP[r * c.T + j], 0.0f) << "row " << r << " key " << j;
    expect_close(att_.download(), att, "att");
    expect_close(dqkv_.download(), dqkv, "dqkv");
    for (auto* g : {&att_, &P_, &dqkv_, &dot_}) EXPECT_TRUE(g->guards_intact());
  }
}

}  // namespace
}  // namespace dp::kernels::cuda
#endif
