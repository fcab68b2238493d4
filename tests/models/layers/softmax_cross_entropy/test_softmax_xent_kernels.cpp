// models/layers/softmax_cross_entropy/softmax_xent_kernels.h against the CPU twin (models/layers/softmax_cross_entropy/softmax_xent_ref.h, which
// accumulates in double). The kernel accumulates each row in f32, so the comparison allows
// f32 rounding of the row's log-sum-exp: its error is a few f32 ulps of |lse| plus the f32 sum
// of K exponentials, at most ~1e-5 absolute for the |lse| <= ~60 of these inputs, which is
// also the relative error of each probability exp(z - lse). The kernel then rounds to f32 the
// target q_k (formed in double), p_k - q_k and the quotient by N; the twin rounds its double
// result to f32 once: u q_k + 3 u |p_k - q_k| more (u = 2^-24; for |p_k - q_k| near 1 that is an
// ulp of the output, which 1e-7 / N was not), and 2^-149 for two roundings among subnormals:
//   dlogits: |gpu - cpu| <= (2e-5 p_k + u (q_k + 3 |p_k - q_k|)) / N + 2^-149
//            (p_k = softmax(z)_k of the CPU twin, q_k the smoothed target)
//   loss:    |gpu - cpu| <= 2e-5 * max(1, |cpu|)        (the mean, and every row)
// Guard regions around dlogits, row_loss and loss catch out-of-bounds writes.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <algorithm>
#include <cmath>
#include <string>

#include "models/layers/softmax_cross_entropy/softmax_xent_ref.h"
#include "models/layers/softmax_cross_entropy/softmax_xent_kernels.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaSoftmaxXent, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(softmax_xent(nullptr, nullptr, nullptr, nullptr, nullptr, 4, 10, 0.0, nullptr, /*ld=*/9),
            cudaErrorInvalidValue);
  EXPECT_EQ(softmax_xent(nullptr, nullptr, nullptr, nullptr, nullptr, -1, 10, 0.0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(softmax_xent(nullptr, nullptr, nullptr, nullptr, nullptr, 4, 0, 0.0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(softmax_xent(nullptr, nullptr, nullptr, nullptr, nullptr, 4, 10, 1.5, nullptr), cudaErrorInvalidValue);
}

class CudaSoftmaxXentGpu : public test::GpuTest {};

DP_GPU_TEST_F(CudaSoftmaxXentGpu, LossAndGradientMatchTheCpuTwin) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  struct Case { int64_t N, K; float spread; };
  // K below, at and above a warp; logits spread wide enough to make lse large.
  for (Case c : {Case{1, 1, 1}, Case{1, 10, 3}, Case{7, 33, 3}, Case{256, 10, 5}, Case{128, 1000, 4},
                 Case{1000, 100, 20}}) {
    for (double eps : {0.0, 0.1}) {
      for (bool with_grad : {true, false}) {
        SCOPED_TRACE(testing::Message() << "N " << c.N << " K " << c.K << " eps " << eps << " grad " << with_grad);
        const auto z = test::normal_floats(c.N * c.K, gen_, c.spread);
        std::vector<int32_t> y(c.N);
        for (auto& l : y) l = static_cast<int32_t>(gen_() % c.K);
        std::vector<float> dl(c.N * c.K);
        const double want = cpu::softmax_xent<float>(z.data(), y.data(), dl.data(), c.N, c.K, eps);
        std::vector<double> row_want(c.N);
        for (int64_t n = 0; n < c.N; ++n)
          row_want[n] = cpu::softmax_xent<float>(z.data() + n * c.K, y.data() + n, nullptr, 1, c.K, eps);

        test::Guarded<float> z_(z, s), dl_(c.N * c.K, s), rows_(c.N, s), loss_(1, s);
        test::Guarded<int32_t> y_(y, s);
        CHECK_CUDA(softmax_xent(z_.get(), y_.get(), with_grad ? dl_.get() : nullptr, rows_.get(), loss_.get(), c.N,
                                c.K, eps, s));
        const float got = loss_.download()[0];
        EXPECT_NEAR(got, want, 2e-5 * std::max(1.0, std::fabs(want)));
        const auto rows = rows_.download();
        for (int64_t n = 0; n < c.N; ++n)
          ASSERT_NEAR(rows[n], row_want[n], 2e-5 * std::max(1.0, std::fabs(row_want[n]))) << "row " << n;
        EXPECT_TRUE(rows_.guards_intact());
        EXPECT_TRUE(loss_.guards_intact());
        EXPECT_TRUE(dl_.guards_intact());
        if (!with_grad) continue;
        const auto gd = dl_.download();
        int64_t bad = 0;
        for (int64_t n = 0; n < c.N; ++n) {
          const double q_off = eps / c.K;
          for (int64_t k = 0; k < c.K; ++k) {
            const int64_t i = n * c.K + k;
            const double q = (k == y[n] ? 1.0 - eps : 0.0) + q_off;
            const double p = dl[i] * static_cast<double>(c.N) + q;  // the twin's softmax, recovered
            const double u = 0x1p-24;                                // f32's unit roundoff
            const double tol =
                (2e-5 * std::fabs(p) + u * (q + 3 * std::fabs(p - q))) / static_cast<double>(c.N) + 0x1p-149;
            if (std::fabs(gd[i] - dl[i]) <= tol) continue;
            if (bad++ < 5) ADD_FAILURE() << "dlogits[" << n << "," << k << "]: " << gd[i] << " vs " << dl[i];
          }
        }
        EXPECT_EQ(bad, 0);
      }
    }
  }
}

// Rows of ld > K (a padded LM head's logits, the padding huge or NaN): the loss, the row losses and
// the first K gradient columns bitwise those of the compact rows, on the device and on the CPU twin,
// and the padding's gradient 0.
DP_GPU_TEST_F(CudaSoftmaxXentGpu, PaddedRowsGiveTheCompactRowsLossAndAZeroPaddingGradient) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  struct Case { int64_t N, K, ld; };
  for (Case c : {Case{7, 33, 64}, Case{24, 65, 128}, Case{5, 257, 320}}) {
    SCOPED_TRACE(testing::Message() << "N " << c.N << " K " << c.K << " ld " << c.ld);
    const auto compact = test::normal_floats(c.N * c.K, gen_, 3.0f);
    std::vector<float> padded(static_cast<size_t>(c.N * c.ld));
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t k = 0; k < c.ld; ++k)
        padded[n * c.ld + k] = k < c.K ? compact[n * c.K + k] : (k % 2 ? 1e30f : NAN);
    std::vector<int32_t> y(c.N);
    for (auto& l : y) l = static_cast<int32_t>(gen_() % c.K);
    std::vector<float> dc(c.N * c.K), dpad(c.N * c.ld, 7.0f);
    const double want = cpu::softmax_xent<float>(compact.data(), y.data(), dc.data(), c.N, c.K, 0.1);
    EXPECT_EQ(cpu::softmax_xent<float>(padded.data(), y.data(), dpad.data(), c.N, c.K, 0.1, c.ld), want);
    test::Guarded<float> zc_(compact, s), dc_(c.N * c.K, s), rc_(c.N, s), lc_(1, s);
    test::Guarded<float> zp_(padded, s), dp_(c.N * c.ld, s), rp_(c.N, s), lp_(1, s);
    test::Guarded<int32_t> y_(y, s);
    CHECK_CUDA(softmax_xent(zc_.get(), y_.get(), dc_.get(), rc_.get(), lc_.get(), c.N, c.K, 0.1, s));
    CHECK_CUDA(softmax_xent(zp_.get(), y_.get(), dp_.get(), rp_.get(), lp_.get(), c.N, c.K, 0.1, s, c.ld));
    EXPECT_EQ(lp_.download()[0], lc_.download()[0]);
    EXPECT_EQ(rp_.download(), rc_.download());
    const auto gc = dc_.download(), gp = dp_.download();
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t k = 0; k < c.ld; ++k) {
        const float cpu_want = k < c.K ? dc[n * c.K + k] : 0.0f;
        ASSERT_EQ(dpad[n * c.ld + k], cpu_want) << "CPU twin, row " << n << " column " << k;
        ASSERT_EQ(gp[n * c.ld + k], k < c.K ? gc[n * c.K + k] : 0.0f) << "row " << n << " column " << k;
      }
    EXPECT_TRUE(dp_.guards_intact());
  }
}

DP_GPU_TEST_F(CudaSoftmaxXentGpu, AnEmptyBatchHasLossZeroAndABadLabelGivesNaNNotAnOverrun) {
  const cudaStream_t s = stream_.get();
  test::Guarded<float> loss_(std::vector<float>{123.0f}, s), rows_(0, s);
  CHECK_CUDA(softmax_xent(nullptr, nullptr, nullptr, rows_.get(), loss_.get(), 0, 10, 0.0, s));
  EXPECT_EQ(loss_.download()[0], 0.0f);  // as the CPU twin

  const std::vector<float> z = test::normal_floats(2 * 5, gen_);
  test::Guarded<float> z_(z, s), dl_(10, s), r_(2, s), l_(1, s);
  test::Guarded<int32_t> y_(std::vector<int32_t>{1, 5}, s);  // row 1's label is out of range
  CHECK_CUDA(softmax_xent(z_.get(), y_.get(), dl_.get(), r_.get(), l_.get(), 2, 5, 0.0, s));
  const auto r = r_.download(), dl = dl_.download();
  EXPECT_FALSE(std::isnan(r[0]));
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_TRUE(std::isnan(l_.download()[0]));
  for (int k = 0; k < 5; ++k) {
    EXPECT_FALSE(std::isnan(dl[k]));
    EXPECT_TRUE(std::isnan(dl[5 + k]));
  }
  EXPECT_TRUE(dl_.guards_intact());
  EXPECT_TRUE(r_.guards_intact());
}

// models::SoftmaxCrossEntropy's device call (the loss the trainer uses), here beside its kernel.
TEST(CudaSoftmaxCrossEntropyLoss, DeviceCallRefusesHostTensors) {
  const Tensor z = Tensor::zeros({2, 3}), y = Tensor::zeros({2}, DType::I32);
  EXPECT_THROW(models::SoftmaxCrossEntropy().forward_backward(z, y, nullptr, nullptr), DpError);
}

DP_GPU_TEST_F(CudaSoftmaxXentGpu, SoftmaxCrossEntropyDeviceCallMatchesItsCpuCall) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const Device dev = Device::cuda(0);
  const models::SoftmaxCrossEntropy loss(0.1);
  for (int64_t N : {int64_t{1}, int64_t{8}, int64_t{300}, int64_t{5}}) {  // shrinking N reuses the scratch
    const int64_t K = 10;
    SCOPED_TRACE(testing::Message() << "N " << N);
    Tensor z = Tensor::zeros({N, K}), y = Tensor::zeros({N}, DType::I32), d = Tensor::zeros({N, K});
    const auto zv = test::normal_floats(N * K, gen_, 3.0f);
    for (int64_t i = 0; i < N * K; ++i) z.data<float>()[i] = zv[i];
    for (int64_t n = 0; n < N; ++n) y.data<int32_t>()[n] = static_cast<int32_t>(gen_() % K);
    const double want = loss.forward_backward(z, y, &d);
    Tensor zd = Tensor::zeros({N, K}, DType::F32, dev), yd = Tensor::zeros({N}, DType::I32, dev),
           dd = Tensor::zeros({N, K}, DType::F32, dev);
    zd.copy_from(z);
    yd.copy_from(y);
    const double got = loss.forward_backward(zd, yd, &dd, s());
    EXPECT_NEAR(got, want, 2e-5 * std::max(1.0, std::fabs(want)));
    EXPECT_NEAR(loss.forward_backward(zd, yd, nullptr, s()), got, 0.0);  // deterministic, loss only
    Tensor back = Tensor::zeros({N, K});
    back.copy_from(dd);
    for (int64_t i = 0; i < N * K; ++i)
      ASSERT_NEAR(back.data<float>()[i], d.data<float>()[i], 2e-5 / static_cast<double>(N)) << "dlogits " << i;
  }
}

// The loss object with `classes` < the rows' width (a padded head's): device and CPU calls agree,
// and a label among the padding columns is a bad label.
DP_GPU_TEST_F(CudaSoftmaxXentGpu, SoftmaxCrossEntropyTakesTheClassesOfPaddedRows) {
  const Device dev = Device::cuda(0);
  const models::SoftmaxCrossEntropy loss(0.1);
  const int64_t N = 6, K = 5, ld = 8;
  Tensor z = Tensor::zeros({N, ld}), y = Tensor::zeros({N}, DType::I32), d = Tensor::zeros({N, ld});
  const auto zv = test::normal_floats(N * ld, gen_, 3.0f);
  for (int64_t i = 0; i < N * ld; ++i) z.data<float>()[i] = zv[i];
  for (int64_t n = 0; n < N; ++n) y.data<int32_t>()[n] = static_cast<int32_t>(gen_() % K);
  const double want = loss.forward_backward(z, y, &d, K);
  Tensor zd = Tensor::zeros({N, ld}, DType::F32, dev), yd = Tensor::zeros({N}, DType::I32, dev),
         dd = Tensor::zeros({N, ld}, DType::F32, dev);
  zd.copy_from(z);
  yd.copy_from(y);
  EXPECT_NEAR(loss.forward_backward(zd, yd, &dd, s(), K), want, 2e-5 * std::max(1.0, std::fabs(want)));
  Tensor back = Tensor::zeros({N, ld});
  back.copy_from(dd);
  for (int64_t i = 0; i < N * ld; ++i) {
    if (i % ld >= K) {
      ASSERT_EQ(d.data<float>()[i], 0.0f) << i;
    }
    ASSERT_NEAR(back.data<float>()[i], d.data<float>()[i], 2e-5 / static_cast<double>(N)) << "dlogits " << i;
  }
  y.data<int32_t>()[2] = static_cast<int32_t>(K + 1);  // a padding column: not a class
  EXPECT_THROW(loss.forward_backward(z, y, nullptr, K), DpError);
}

DP_GPU_TEST_F(CudaSoftmaxXentGpu, SoftmaxCrossEntropyDeviceCallNamesABadLabel) {
  const Device dev = Device::cuda(0);
  Tensor y = Tensor::zeros({3}, DType::I32);
  y.data<int32_t>()[1] = 7;
  Tensor zd = Tensor::zeros({3, 5}, DType::F32, dev), yd = Tensor::zeros({3}, DType::I32, dev);
  yd.copy_from(y);
  try {
    models::SoftmaxCrossEntropy().forward_backward(zd, yd, nullptr, s());
    ADD_FAILURE() << "no error for label 7 of 5 classes";
  } catch (const DpError& e) {
    EXPECT_NE(std::string(e.what()).find("label 7 at batch index 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaSoftmaxXent, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
