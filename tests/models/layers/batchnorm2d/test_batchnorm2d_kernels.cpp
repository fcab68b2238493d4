// models/layers/batchnorm2d/batchnorm2d_kernels.h against the CPU twin (models/layers/batchnorm2d/batchnorm2d_ref.h, run in double on
// the very values the GPU sees: inputs rounded through the data type). The sums are f64 on both
// sides in different orders: equal to ~1e-10 of the sum of magnitudes. Elementwise outputs are
// rounded once to the data type: within two rounding units of the f64 reference. The partition
// of the sums (which decides their order) is checked on the host; its determinism on the GPU
// (same input, same bits). Guard regions catch out-of-bounds writes.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <algorithm>
#include <cmath>

#include "models/layers/batchnorm2d/batchnorm2d_ref.h"
#include "models/layers/batchnorm2d/batchnorm2d_kernels.h"
#include "tests/kernels/cuda_dtype_layout.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaBatchnorm, PartitionCoversEveryValueOnceWithinTheBlockBudget) {
  for (int64_t N : {0, 1, 2, 3, 17, 256})
    for (int64_t C : {1, 3, 31, 32, 33, 64, 2048})
      for (int64_t HW : {0, 1, 5, 49, 3136, 12544})
        for (bool nhwc : {false, true}) {
          SCOPED_TRACE(testing::Message() << N << "x" << C << "x" << HW << (nhwc ? " nhwc" : " nchw"));
          const BnDims d{N, C, HW, nhwc};
          const BnPartition p = batchnorm_partition(d);
          const int64_t M = N * HW;
          EXPECT_EQ(p.tiles, nhwc ? (C + 31) / 32 : C);
          EXPECT_GE(p.chunks, 1);
          EXPECT_LE(p.chunks, 65535);  // gridDim.y
          EXPECT_LE(p.tiles * p.chunks, std::max<int64_t>(p.tiles, 1024));
          if (M > 0) {
            EXPECT_GE(p.chunks * p.chunk_len, M);        // every value in a chunk
            EXPECT_LT((p.chunks - 1) * p.chunk_len, M);  // no empty chunk
          } else {
            EXPECT_EQ(p.chunks, 1);
            EXPECT_EQ(p.chunk_len, 0);
          }
          EXPECT_EQ(batchnorm_scratch_bytes(d), static_cast<size_t>(p.chunks * 2 * C) * sizeof(double));
        }
  EXPECT_EQ(batchnorm_scratch_bytes(BnDims{-1, 3, 4, false}), 0u);
  // Big channels: one chunk each, however long; big M on few channels: many chunks.
  EXPECT_EQ(batchnorm_partition(BnDims{256, 2048, 49, false}).chunks, 1);
  EXPECT_EQ(batchnorm_partition(BnDims{256, 2, 12544, false}).chunks, 512);
}

TEST(CudaBatchnorm, ArgumentsAreCheckedBeforeAnyLaunch) {
  double* fake = reinterpret_cast<double*>(uintptr_t{64});
  const BnDims bad{-1, 3, 4, false}, ok{2, 3, 4, false}, none{2, 0, 4, false};
  EXPECT_EQ(batchnorm_channel_sum(fake, fake, DType::F32, bad, fake, 1 << 20, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_channel_sum(fake, fake, DType::F64, ok, fake, 1 << 20, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_channel_sum(fake, fake, DType::F32, ok, fake, 0, nullptr), cudaErrorInvalidValue);  // scratch
  EXPECT_EQ(batchnorm_channel_sum(fake, fake, DType::F32, ok, nullptr, 1 << 20, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_channel_sum(fake, fake, DType::BF16, none, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(batchnorm_channel_sqdev(fake, fake, DType::I64, fake, ok, fake, 1 << 20, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_grad_sums(fake, nullptr, fake, fake, DType::F16, fake, fake, ok, fake, 1 << 20, nullptr),
            cudaErrorInvalidValue);  // the second sum's output
  EXPECT_EQ(batchnorm_grad_input(fake, fake, fake, DType::F32, nullptr, fake, fake, fake, nullptr, 4.0, ok, nullptr),
            cudaErrorInvalidValue);  // one sum without the other
  EXPECT_EQ(batchnorm_grad_input(fake, fake, fake, DType::F32, nullptr, fake, fake, nullptr, nullptr, 4.0, ok, nullptr),
            cudaErrorInvalidValue);  // no sums: eval's constant statistics are batchnorm2d_reduce.h's
  EXPECT_EQ(batchnorm_grad_input(fake, fake, fake, DType::BF16, nullptr, fake, fake, fake, fake, 2.0, none, nullptr),
            cudaSuccess);
  EXPECT_EQ(batchnorm_grad_input(fake, fake, fake, DType::F32, nullptr, fake, fake, fake, fake, 0.0, ok, nullptr),
            cudaErrorInvalidValue);  // batch statistics need a count
  EXPECT_EQ(batchnorm_set_count(nullptr, 3.0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_mean(fake, fake, nullptr, 3, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_mean(fake, fake, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(batchnorm_finalize(fake, nullptr, nullptr, fake, fake, 1.0, 0.1, 1e-5, true, 3, nullptr),
            cudaErrorInvalidValue);  // an unbiased variance needs 2 values
  EXPECT_EQ(batchnorm_finalize(fake, nullptr, nullptr, fake, fake, 8.0, 0.1, 0.0, false, 3, nullptr),
            cudaErrorInvalidValue);  // eps
  EXPECT_EQ(batchnorm_finalize(fake, nullptr, nullptr, fake, fake, 8.0, 1.5, 1e-5, true, 3, nullptr),
            cudaErrorInvalidValue);  // momentum
  EXPECT_EQ(batchnorm_running_stats(fake, fake, nullptr, nullptr, 1e-5, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_accumulate_param_grads(nullptr, nullptr, fake, fake, 0, nullptr), cudaSuccess);
  EXPECT_EQ(increment_counter(nullptr, nullptr), cudaErrorInvalidValue);
}

class CudaBatchnormGpu : public test::GpuTest {};

struct Shape3 {
  int64_t N, C, HW;
};

// Every building block on one shape, dtype and layout, against the twin in double.
void check_against_twin(const Shape3& s, DType dt, bool nhwc, std::mt19937_64& gen, cudaStream_t st) {
  SCOPED_TRACE(testing::Message() << s.N << "x" << s.C << "x" << s.HW << " " << dtype_name(dt)
                                  << (nhwc ? " nhwc" : " nchw"));
  const BnDims d{s.N, s.C, s.HW, nhwc};
  const int64_t C = s.C, total = s.N * s.C * s.HW;
  const double M = static_cast<double>(s.N * s.HW);
  // Offset inputs: the two-pass variance must not lose them.
  std::vector<float> x = test::normal_floats(total, gen, 2.0f), dy = test::normal_floats(total, gen);
  for (auto& v : x) v = test::round_to(v + 3.0f, dt);
  for (auto& v : dy) v = test::round_to(v, dt);
  std::vector<float> w = test::normal_floats(C, gen);
  const std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end());

  std::vector<double> sum(C), mean(C), sqdev(C), var(C), invstd(C), sdy(C), sdyx(C);
  cpu::batchnorm2d_channel_sum<double>(sum.data(), xd.data(), s.N, C, s.HW);
  for (int64_t c = 0; c < C; ++c) mean[c] = sum[c] / M;
  cpu::batchnorm2d_channel_sqdev<double>(sqdev.data(), xd.data(), mean.data(), s.N, C, s.HW);
  for (int64_t c = 0; c < C; ++c) var[c] = sqdev[c] / M, invstd[c] = 1.0 / std::sqrt(var[c] + 1e-5);
  cpu::batchnorm2d_grad_sums<double>(sdy.data(), sdyx.data(), dyd.data(), xd.data(), mean.data(), invstd.data(), s.N,
                                     C, s.HW);

  test::Guarded<uint8_t> x_(test::encode(x, dt, s.N, C, s.HW, nhwc), st), dy_(test::encode(dy, dt, s.N, C, s.HW, nhwc), st);
  test::Guarded<uint8_t> dx_(total * dtype_size(dt), st);
  test::Guarded<double> sum_(C + 1, st), mean_(mean, st), invstd_(invstd, st), s1_(C, st), s2_(C, st), out_(C, st);
  test::Guarded<float> w_(w, st);
  const size_t bytes = batchnorm_scratch_bytes(d);
  test::Guarded<uint8_t> scratch_(bytes, st);

  // Sums: f64 on both sides, in different orders.
  double mag = 0, mag_sq = 0, mag_g = 0;
  for (int64_t i = 0; i < total; ++i) mag += std::fabs(xd[i]), mag_g += std::fabs(dyd[i]) * 8;
  for (double v : sqdev) mag_sq += v;
  CHECK_CUDA(batchnorm_channel_sum(sum_.get(), x_.get(), dt, d, scratch_.get(), bytes, st));
  CHECK_CUDA(batchnorm_set_count(sum_.get() + C, M, st));
  const auto got_sum = sum_.download();
  EXPECT_EQ(got_sum[C], M);
  for (int64_t c = 0; c < C; ++c) ASSERT_NEAR(got_sum[c], sum[c], 1e-10 * (mag + 1)) << "sum " << c;
  CHECK_CUDA(batchnorm_mean(out_.get(), sum_.get(), sum_.get() + C, C, st));
  const auto got_mean = out_.download();
  for (int64_t c = 0; c < C; ++c) ASSERT_NEAR(got_mean[c], mean[c], 1e-10 * (mag / M + 1)) << "mean " << c;
  CHECK_CUDA(batchnorm_channel_sqdev(s1_.get(), x_.get(), dt, mean_.get(), d, scratch_.get(), bytes, st));
  const auto got_sq = s1_.download();
  for (int64_t c = 0; c < C; ++c) ASSERT_NEAR(got_sq[c], sqdev[c], 1e-10 * (mag_sq + 1)) << "sqdev " << c;
  CHECK_CUDA(batchnorm_grad_sums(s1_.get(), s2_.get(), dy_.get(), x_.get(), dt, mean_.get(), invstd_.get(), d,
                                 scratch_.get(), bytes, st));
  const auto got_s1 = s1_.download(), got_s2 = s2_.download();
  for (int64_t c = 0; c < C; ++c) {
    ASSERT_NEAR(got_s1[c], sdy[c], 1e-10 * (mag_g + 1)) << "sum dy " << c;
    ASSERT_NEAR(got_s2[c], sdyx[c], 1e-10 * (mag_g + 1)) << "sum dy xhat " << c;
  }
  // Deterministic: the same input gives the same bits.
  CHECK_CUDA(batchnorm_grad_sums(out_.get(), s2_.get(), dy_.get(), x_.get(), dt, mean_.get(), invstd_.get(), d,
                                 scratch_.get(), bytes, st));
  const auto again = out_.download();
  for (int64_t c = 0; c < C; ++c) ASSERT_EQ(std::memcmp(&again[c], &got_s1[c], 8), 0) << "channel " << c;

  // The input gradient: rounded once to dt.
  const double u = test::unit_roundoff(dt);
  std::vector<double> wd(w.begin(), w.end()), dxref(total), mdy(C), mdyx(C);
  for (int64_t c = 0; c < C; ++c) mdy[c] = sdy[c] / M, mdyx[c] = sdyx[c] / M;
  cpu::batchnorm2d_grad_input<double>(dxref.data(), dyd.data(), xd.data(), wd.data(), mean.data(), invstd.data(),
                                      mdy.data(), mdyx.data(), s.N, C, s.HW);
  test::Guarded<double> sdy_(sdy, st), sdyx_(sdyx, st);
  CHECK_CUDA(batchnorm_grad_input(dx_.get(), dy_.get(), x_.get(), dt, w_.get(), mean_.get(), invstd_.get(),
                                  sdy_.get(), sdyx_.get(), M, d, st));
  const auto dx = test::decode(dx_.download(), dt, s.N, C, s.HW, nhwc);
  for (int64_t i = 0; i < total; ++i) ASSERT_NEAR(dx[i], dxref[i], 2 * u * std::fabs(dxref[i]) + 1e-6) << "dx " << i;
  EXPECT_TRUE(x_.guards_intact() && dy_.guards_intact() && dx_.guards_intact());
  EXPECT_TRUE(sum_.guards_intact() && s1_.guards_intact() && s2_.guards_intact() && out_.guards_intact());
  EXPECT_TRUE(scratch_.guards_intact());
}

DP_GPU_TEST_F(CudaBatchnormGpu, BuildingBlocksMatchTheCpuTwin) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  // One chunk and many; C below, at and above the NHWC tile of 32; 1x1 planes.
  for (Shape3 sh : {Shape3{1, 1, 2}, Shape3{2, 3, 20}, Shape3{4, 33, 49}, Shape3{3, 64, 1}, Shape3{8, 5, 3136},
                    Shape3{64, 2, 4096}, Shape3{16, 70, 196}})
    for (DType dt : {DType::F32, DType::BF16, DType::F16})
      for (bool nhwc : {false, true}) check_against_twin(sh, dt, nhwc, gen_, s());
}

DP_GPU_TEST_F(CudaBatchnormGpu, PerChannelStepsMatchTorchsFormulas) {
  const cudaStream_t st = s();
  const int64_t C = 37;
  const double count = 50, momentum = 0.2, eps = 1e-5;
  std::vector<double> mean(C), sqdev(C);
  std::vector<float> rm = test::normal_floats(C, gen_), rv(C), dw = test::normal_floats(C, gen_),
                     db = test::normal_floats(C, gen_);
  for (int64_t c = 0; c < C; ++c) {
    mean[c] = std::normal_distribution<double>()(gen_);
    sqdev[c] = count * (0.5 + c * 0.1);
    rv[c] = 0.5f + 0.01f * static_cast<float>(c);
  }
  test::Guarded<double> mean_(mean, st), sqdev_(sqdev, st), invstd_(C, st), m2_(C, st), i2_(C, st);
  test::Guarded<float> rm_(rm, st), rv_(rv, st), dw_(dw, st), db_(db, st);
  CHECK_CUDA(batchnorm_finalize(invstd_.get(), rm_.get(), rv_.get(), mean_.get(), sqdev_.get(), count, momentum, eps,
                                true, C, st));
  const auto invstd = invstd_.download();
  const auto rm2 = rm_.download(), rv2 = rv_.download();
  for (int64_t c = 0; c < C; ++c) {
    const double var = sqdev[c] / count;
    EXPECT_NEAR(invstd[c], 1.0 / std::sqrt(var + eps), 1e-15);
    EXPECT_EQ(rm2[c], static_cast<float>((1 - momentum) * rm[c] + momentum * mean[c]));
    EXPECT_EQ(rv2[c], static_cast<float>((1 - momentum) * rv[c] + momentum * var * (count / (count - 1))));
  }
  CHECK_CUDA(batchnorm_running_stats(m2_.get(), i2_.get(), rm_.get(), rv_.get(), eps, C, st));
  const auto m2 = m2_.download(), i2 = i2_.download();
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(m2[c], static_cast<double>(rm2[c]));
    EXPECT_NEAR(i2[c], 1.0 / std::sqrt(static_cast<double>(rv2[c]) + eps), 1e-15);
  }
  CHECK_CUDA(batchnorm_accumulate_param_grads(dw_.get(), db_.get(), mean_.get(), sqdev_.get(), C, st));
  const auto dw2 = dw_.download(), db2 = db_.download();
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(dw2[c], dw[c] + static_cast<float>(sqdev[c]));
    EXPECT_EQ(db2[c], db[c] + static_cast<float>(mean[c]));
  }
  test::Guarded<int64_t> counter_(std::vector<int64_t>{41}, st);
  CHECK_CUDA(increment_counter(counter_.get(), st));
  EXPECT_EQ(counter_.download()[0], 42);
  EXPECT_TRUE(invstd_.guards_intact() && rm_.guards_intact() && rv_.guards_intact() && dw_.guards_intact());
  EXPECT_TRUE(db_.guards_intact() && m2_.guards_intact() && i2_.guards_intact() && counter_.guards_intact());
}

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaBatchnorm, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
