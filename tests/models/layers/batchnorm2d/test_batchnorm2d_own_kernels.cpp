// The own batch-norm path's kernels (models/layers/batchnorm2d/batchnorm2d_reduce.h, _apply.h:
// train.bn_impl = "own") against the CPU twin (models/layers/batchnorm2d/batchnorm2d_ref.h, in
// f64 on the very values the GPU sees), NCHW and NHWC, f32/bf16/f16, C and H*W that do and do
// not allow 16-byte loads, misaligned pointers (one value at a time), tiny batches; the fused
// epilogues (ReLU, residual add + ReLU) forward and backward. Two kinds of bound:
//   - each stage on the GPU's own inputs: the elementwise kernels from the per-channel values the
//     GPU computed (downloaded), rounded once to the data type after a few f32 operations; the
//     reductions against f64 sums of the same terms, within f32 accumulation (1e-5 of the sum of
//     magnitudes: a thread adds at most a few hundred terms here);
//   - the whole path against the twin: statistics within 1e-5 of the twin's (relative to the
//     standard deviation), so outputs within that plus the output's rounding.
// Determinism (same input, same bits), and guard regions around every buffer.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/gpu_test.h"
#include "models/layers/batchnorm2d/batchnorm2d_apply.h"
#include "models/layers/batchnorm2d/batchnorm2d_reduce.h"
#include "models/layers/batchnorm2d/batchnorm2d_ref.h"
#include "tests/kernels/cuda_dtype_layout.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

constexpr double kF32 = 1.0 / (1 << 24);  // f32's unit roundoff

TEST(CudaBatchnormOwn, ReducePlanCoversEveryValueOnceWithinTheBlockBudget) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (bool vec : {false, true})
      for (int64_t N : {0, 1, 2, 3, 17, 256})
        for (int64_t C : {1, 3, 4, 5, 8, 12, 31, 32, 33, 64, 2048})
          for (int64_t HW : {0, 1, 5, 8, 49, 3136, 12544})
            for (bool nhwc : {false, true}) {
              SCOPED_TRACE(testing::Message() << N << "x" << C << "x" << HW << (nhwc ? " nhwc " : " nchw ")
                                              << dtype_name(dt) << (vec ? " aligned" : " misaligned"));
              const BnDims d{N, C, HW, nhwc};
              const BnReducePlan p = batchnorm_reduce_plan(d, dt, vec);
              const int vmax = static_cast<int>(16 / dtype_size(dt));
              const bool can = vec && (nhwc ? C % vmax == 0 : HW % vmax == 0);
              EXPECT_EQ(p.vec, can ? vmax : 1);
              EXPECT_EQ(p.block_x * p.block_y, 256);
              EXPECT_EQ(p.block_x & (p.block_x - 1), 0);  // powers of two: the block's tree
              EXPECT_EQ(p.block_y & (p.block_y - 1), 0);
              if (nhwc) {
                EXPECT_LE(p.block_x, 32);
                EXPECT_GE(p.tiles * p.block_x * p.vec, C);                // every channel in a tile
                EXPECT_LT((p.tiles - 1) * p.block_x * p.vec, C);          // no empty tile
              } else {
                EXPECT_EQ(p.tiles, C);
              }
              const int64_t units = nhwc ? N * HW : N * HW / p.vec;
              EXPECT_GE(p.chunks, 1);
              EXPECT_LE(p.chunks, 65535);
              EXPECT_LE(p.tiles * p.chunks, std::max<int64_t>(p.tiles, kBnMaxReduceBlocks));
              if (units > 0) {
                EXPECT_GE(p.chunks * p.chunk_len, units);
                EXPECT_LT((p.chunks - 1) * p.chunk_len, units);
              } else {
                EXPECT_EQ(p.chunks, 1);
                EXPECT_EQ(p.chunk_len, 0);
              }
              EXPECT_GE(batchnorm_reduce_scratch_bytes(d, dt), static_cast<size_t>(p.chunks * 2 * C) * 4);
            }
  // ResNet-50's first batch norm in bf16 channels last: 8 channels per 16-byte load, 8 groups
  // across, 32 rows along; 1024 chunks of 784 rows.
  const BnReducePlan p = batchnorm_reduce_plan(BnDims{256, 64, 112 * 112, true}, DType::BF16, true);
  EXPECT_EQ(p.vec, 8);
  EXPECT_EQ(p.block_x, 8);
  EXPECT_EQ(p.block_y, 32);
  EXPECT_EQ(p.tiles, 1);
  EXPECT_EQ(p.chunks, 1024);
  EXPECT_EQ(p.chunk_len, 3136);
  EXPECT_EQ(batchnorm_reduce_scratch_bytes(BnDims{-1, 3, 4, false}, DType::F32), 0u);
  EXPECT_EQ(batchnorm_reduce_plan(BnDims{2, 3, 4, false}, DType::I64, true).tiles, 0);
}

TEST(CudaBatchnormOwn, ArgumentsAreCheckedBeforeAnyLaunch) {
  float* f = reinterpret_cast<float*>(uintptr_t{64});
  double* g = reinterpret_cast<double*>(uintptr_t{64});
  const BnDims ok{2, 3, 4, false}, bad{-1, 3, 4, false}, none{2, 0, 4, true}, one{1, 3, 1, true};
  const size_t big = 1 << 20;
  EXPECT_EQ(batchnorm_welford_stats(f, f, f, f, f, f, DType::F32, f, bad, 0.1, 1e-5, true, f, big, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_welford_stats(f, f, f, f, f, f, DType::I64, f, ok, 0.1, 1e-5, true, f, big, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_welford_stats(f, f, f, f, f, f, DType::F32, f, ok, 0.1, 0.0, true, f, big, nullptr),
            cudaErrorInvalidValue);  // eps
  EXPECT_EQ(batchnorm_welford_stats(f, f, f, f, f, f, DType::F32, f, ok, 1.5, 1e-5, true, f, big, nullptr),
            cudaErrorInvalidValue);  // momentum
  EXPECT_EQ(batchnorm_welford_stats(f, f, f, f, f, f, DType::F32, f, ok, 0.1, 1e-5, true, f, 0, nullptr),
            cudaErrorInvalidValue);  // scratch
  EXPECT_EQ(batchnorm_welford_stats(f, f, f, nullptr, f, f, DType::F32, f, ok, 0.1, 1e-5, true, f, big, nullptr),
            cudaErrorInvalidValue);  // running statistics to update
  EXPECT_EQ(batchnorm_welford_stats(f, f, f, f, f, f, DType::BF16, f, one, 0.1, 1e-5, true, f, big, nullptr),
            cudaErrorInvalidValue);  // one value per channel: no unbiased variance
  EXPECT_EQ(batchnorm_welford_stats(f, f, f, f, f, f, DType::F16, f, none, 0.1, 1e-5, true, nullptr, 0, nullptr),
            cudaSuccess);
  EXPECT_EQ(batchnorm_backward_reduce(f, f, f, f, nullptr, f, nullptr, f, DType::F32, f, f, f, true, ok, f, big, nullptr),
            cudaErrorInvalidValue);  // c2
  EXPECT_EQ(batchnorm_backward_reduce(f, f, f, f, f, f, nullptr, f, DType::U8, f, f, f, true, ok, f, big, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_backward_reduce(f, f, f, f, f, f, nullptr, f, DType::F32, f, f, f, true, ok, f, 8, nullptr),
            cudaErrorInvalidValue);  // scratch
  EXPECT_EQ(batchnorm_apply(f, nullptr, nullptr, true, DType::F32, f, f, f, ok, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_apply(f, f, nullptr, true, DType::I64, f, f, f, ok, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_apply(nullptr, nullptr, nullptr, true, DType::BF16, nullptr, nullptr, nullptr, none, nullptr),
            cudaSuccess);
  EXPECT_EQ(batchnorm_backward_apply(nullptr, nullptr, f, f, f, DType::F32, f, f, f, f, ok, nullptr),
            cudaErrorInvalidValue);  // no output
  EXPECT_EQ(batchnorm_backward_apply(f, nullptr, f, nullptr, f, DType::F32, f, nullptr, f, f, ok, nullptr),
            cudaErrorInvalidValue);  // dx without its coefficients
  EXPECT_EQ(batchnorm_backward_apply(nullptr, f, f, nullptr, nullptr, DType::F16, nullptr, nullptr, nullptr, nullptr,
                                     none, nullptr),
            cudaSuccess);  // only the residual's gradient: no coefficients needed
  EXPECT_EQ(batchnorm_coefficients(f, f, f, g, nullptr, f, 3, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_coefficients(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(batchnorm_epilogue(nullptr, nullptr, DType::F32, 3, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_epilogue(f, nullptr, DType::I32, 3, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_relu_mask(f, nullptr, f, DType::F32, 3, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(batchnorm_relu_mask(nullptr, nullptr, nullptr, DType::BF16, 0, nullptr), cudaSuccess);
}

class CudaBatchnormOwnGpu : public test::GpuTest {};

struct Sizes {
  int64_t N, C, HW;
};

enum class Epi { None, Relu, AddRelu };
const char* epi_name(Epi e) { return e == Epi::None ? "none" : e == Epi::Relu ? "relu" : "add+relu"; }

// Activations of one dtype and layout on the device, `shift` values into a guarded buffer (1: not
// 16-byte aligned, so the kernels take their one-value-at-a-time path).
class DevAct {
 public:
  DevAct(const std::vector<float>& v, DType dt, const BnDims& d, int64_t shift, cudaStream_t st)
      : dt_(dt), d_(d), pad_(static_cast<size_t>(shift) * dtype_size(dt)),
        buf_(pad_ + v.size() * dtype_size(dt), st) {
    std::vector<uint8_t> bytes(pad_, 0);
    const auto enc = test::encode(v, dt, d.N, d.C, d.HW, d.nhwc);
    bytes.insert(bytes.end(), enc.begin(), enc.end());
    buf_.upload(bytes);
  }
  void* get() const { return buf_.get() + pad_; }
  std::vector<float> values() const {
    const auto all = buf_.download();
    return test::decode(std::vector<uint8_t>(all.begin() + static_cast<std::ptrdiff_t>(pad_), all.end()), dt_, d_.N,
                        d_.C, d_.HW, d_.nhwc);
  }
  bool guards_intact() const { return buf_.guards_intact(); }

 private:
  DType dt_;
  BnDims d_;
  size_t pad_;
  test::Guarded<uint8_t> buf_;
};

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Forward and backward of the own path on one shape, dtype, layout and alignment, with every
// epilogue, against the twin.
void check_own_path(const Sizes& s, DType dt, bool nhwc, int64_t shift, std::mt19937_64& gen, cudaStream_t st) {
  SCOPED_TRACE(testing::Message() << s.N << "x" << s.C << "x" << s.HW << " " << dtype_name(dt)
                                  << (nhwc ? " nhwc" : " nchw") << (shift ? " misaligned" : ""));
  const BnDims d{s.N, s.C, s.HW, nhwc};
  const int64_t C = s.C, HW = s.HW, total = s.N * C * HW;
  const double M = static_cast<double>(s.N * HW), u = test::unit_roundoff(dt), sub = test::subnormal_half_spacing(dt);
  const double momentum = 0.2, eps = 1e-5;
  auto chan = [&](int64_t i) { return (i / HW) % C; };  // channel of logical (NCHW) index i
  // Offset inputs (the variance must not lose them), all representable in dt.
  std::vector<float> x = test::normal_floats(total, gen, 2.0f), r = test::normal_floats(total, gen),
                     dy = test::normal_floats(total, gen);
  for (auto& v : x) v = test::round_to(v + 3.0f, dt);
  for (auto& v : r) v = test::round_to(v, dt);
  for (auto& v : dy) v = test::round_to(v, dt);
  const std::vector<float> w = test::normal_floats(C, gen), b = test::normal_floats(C, gen),
                           rm = test::normal_floats(C, gen), dw0 = test::normal_floats(C, gen),
                           db0 = test::normal_floats(C, gen);
  std::vector<float> rv(C);
  for (int64_t c = 0; c < C; ++c) rv[c] = 0.5f + 0.01f * static_cast<float>(c % 100);
  const std::vector<double> xd = to_double(x);

  // The twin's statistics (f64, two passes).
  std::vector<double> tmean(C), tvar(C), tinv(C);
  cpu::batchnorm2d_stats<double>(tmean.data(), tvar.data(), xd.data(), s.N, C, HW);
  for (int64_t c = 0; c < C; ++c) tinv[c] = 1.0 / std::sqrt(tvar[c] + eps);

  const DevAct x_(x, dt, d, shift, st), r_(r, dt, d, shift, st), dy_(dy, dt, d, shift, st);
  test::Guarded<float> mean_(C, st), invstd_(C, st), scale_(C, st), w_(w, st), b_(b, st), rm_(rm, st), rv_(rv, st);
  test::Guarded<float> k_(C, st), c1_(C, st), c2_(C, st), dw_(C, st), db_(C, st);
  const size_t bytes = batchnorm_reduce_scratch_bytes(d, dt);
  test::Guarded<uint8_t> scratch_(bytes, st);

  CHECK_CUDA(batchnorm_welford_stats(mean_.get(), invstd_.get(), scale_.get(), rm_.get(), rv_.get(), x_.get(), dt,
                                     w_.get(), d, momentum, eps, true, scratch_.get(), bytes, st));
  const auto gmean = mean_.download(), ginv = invstd_.download(), gscale = scale_.download(), grm = rm_.download(),
             grv = rv_.download();
  for (int64_t c = 0; c < C; ++c) {
    const double sd = std::sqrt(tvar[c]);
    ASSERT_NEAR(gmean[c], tmean[c], 1e-5 * (std::fabs(tmean[c]) + sd)) << "mean " << c;
    ASSERT_NEAR(ginv[c], tinv[c], 1e-5 * tinv[c]) << "invstd " << c;
    ASSERT_NEAR(gscale[c], w[c] * tinv[c], 1e-5 * std::fabs(w[c] * tinv[c])) << "scale " << c;
    const double want_rm = (1 - momentum) * rm[c] + momentum * tmean[c];
    const double want_rv = (1 - momentum) * rv[c] + momentum * tvar[c] * M / (M - 1);
    ASSERT_NEAR(grm[c], want_rm, 1e-5 * (std::fabs(want_rm) + sd)) << "running mean " << c;
    ASSERT_NEAR(grv[c], want_rv, 2e-5 * (want_rv + momentum * tvar[c] * M / (M - 1))) << "running var " << c;
  }
  // Deterministic: the same input gives the same bits (running statistics left alone this time).
  CHECK_CUDA(batchnorm_welford_stats(k_.get(), c1_.get(), c2_.get(), nullptr, nullptr, x_.get(), dt, w_.get(), d,
                                     momentum, eps, false, scratch_.get(), bytes, st));
  EXPECT_EQ(std::memcmp(k_.download().data(), gmean.data(), C * 4), 0) << "mean again";
  EXPECT_EQ(std::memcmp(c1_.download().data(), ginv.data(), C * 4), 0) << "invstd again";
  EXPECT_EQ(std::memcmp(c2_.download().data(), gscale.data(), C * 4), 0) << "scale again";

  for (Epi e : {Epi::None, Epi::Relu, Epi::AddRelu}) {
    SCOPED_TRACE(epi_name(e));
    const bool relu = e != Epi::None, add = e == Epi::AddRelu;
    DevAct y_(std::vector<float>(total, 0.0f), dt, d, shift, st);
    CHECK_CUDA(batchnorm_apply(y_.get(), x_.get(), add ? r_.get() : nullptr, relu, dt, mean_.get(), scale_.get(),
                               b_.get(), d, st));
    const std::vector<float> y = y_.values();
    for (int64_t i = 0; i < total; ++i) {
      const int64_t c = chan(i);
      const double rr = add ? r[i] : 0.0, xm = x[i] - static_cast<double>(gmean[c]);
      // This stage: from the GPU's own statistics, a few f32 operations and one rounding.
      double v = xm * gscale[c] + b[c] + rr;
      v = relu ? std::max(v, 0.0) : v;
      ASSERT_NEAR(y[i], v, u * std::fabs(v) + 4 * kF32 * (std::fabs(xm * gscale[c]) + std::fabs(b[c]) + std::fabs(rr)) + sub)
          << "y " << i;
      // The whole path: the twin's statistics.
      const double xhat = (x[i] - tmean[c]) * tinv[c];
      double t = xhat * w[c] + b[c] + rr;
      t = relu ? std::max(t, 0.0) : t;
      ASSERT_NEAR(y[i], t,
                  u * std::fabs(t) + 2e-5 * std::fabs(w[c]) * (std::fabs(xhat) + std::fabs(tmean[c]) * tinv[c] + 1) +
                      1e-6 * (std::fabs(b[c]) + std::fabs(rr)) + sub)
          << "y against the twin " << i;
    }

    // Backward: the mask is the output's, as the kernels see it.
    std::vector<double> g(total);
    for (int64_t i = 0; i < total; ++i) g[i] = relu && !(y[i] > 0) ? 0.0 : dy[i];
    dw_.upload(dw0);
    db_.upload(db0);
    CHECK_CUDA(batchnorm_backward_reduce(dw_.get(), db_.get(), k_.get(), c1_.get(), c2_.get(), dy_.get(),
                                         relu ? y_.get() : nullptr, x_.get(), dt, mean_.get(), invstd_.get(), w_.get(),
                                         true, d, scratch_.get(), bytes, st));
    const auto gdw = dw_.download(), gdb = db_.download(), gk = k_.download(), gc1 = c1_.download(),
               gc2 = c2_.download();
    std::vector<double> s1(C), s2(C), m1(C), m2(C);  // sums of g and g (x - mean), and of their magnitudes
    for (int64_t i = 0; i < total; ++i) {
      const int64_t c = chan(i);
      const double t = g[i] * (x[i] - static_cast<double>(gmean[c]));
      s1[c] += g[i], s2[c] += t, m1[c] += std::fabs(g[i]), m2[c] += std::fabs(t);
    }
    for (int64_t c = 0; c < C; ++c) {
      const double is = ginv[c], sgx = s2[c] * is, kk = static_cast<double>(w[c]) * is;
      ASSERT_NEAR(gdb[c], db0[c] + s1[c], 1e-5 * m1[c] + 2 * kF32 * (std::fabs(db0[c]) + std::fabs(s1[c]))) << "db " << c;
      ASSERT_NEAR(gdw[c], dw0[c] + sgx, 1e-5 * m2[c] * is + 2 * kF32 * (std::fabs(dw0[c]) + std::fabs(sgx))) << "dw " << c;
      ASSERT_NEAR(gk[c], kk, kF32 * std::fabs(kk)) << "k " << c;
      ASSERT_NEAR(gc1[c], -kk * s1[c] / M, std::fabs(kk) * (1e-5 * m1[c] / M + kF32 * std::fabs(s1[c]) / M)) << "c1 " << c;
      ASSERT_NEAR(gc2[c], kk * is * sgx / M, std::fabs(kk) * is * is * (1e-5 * m2[c] + kF32 * std::fabs(s2[c])) / M)
          << "c2 " << c;
    }
    DevAct dx_(std::vector<float>(total, 0.0f), dt, d, shift, st), dr_(std::vector<float>(total, 0.0f), dt, d, shift, st);
    CHECK_CUDA(batchnorm_backward_apply(dx_.get(), add ? dr_.get() : nullptr, dy_.get(), relu ? y_.get() : nullptr,
                                        x_.get(), dt, mean_.get(), k_.get(), c1_.get(), c2_.get(), d, st));
    const std::vector<float> dx = dx_.values(), dr = dr_.values();
    // The twin's input gradient on the same g, from its own statistics and sums.
    std::vector<double> ts1(C), ts2(C);
    cpu::batchnorm2d_grad_sums<double>(ts1.data(), ts2.data(), g.data(), xd.data(), tmean.data(), tinv.data(), s.N, C,
                                       HW);
    for (int64_t i = 0; i < total; ++i) {
      const int64_t c = chan(i);
      const double xm = x[i] - static_cast<double>(gmean[c]), kg = gk[c] * g[i];
      const double v = (kg + gc1[c]) - xm * gc2[c];
      ASSERT_NEAR(dx[i], v, u * std::fabs(v) + 4 * kF32 * (std::fabs(kg) + std::fabs(gc1[c]) + std::fabs(xm * gc2[c])) + sub)
          << "dx " << i;
      const double kt = w[c] * tinv[c], xhat = (x[i] - tmean[c]) * tinv[c];
      const double t = kt * (g[i] - ts1[c] / M - xhat * ts2[c] / M);
      const double scale = std::fabs(kt) * (std::fabs(g[i]) + m1[c] / M + (std::fabs(xhat) + 1) * m2[c] * tinv[c] / M);
      ASSERT_NEAR(dx[i], t, u * std::fabs(t) + 3e-5 * (1 + std::fabs(tmean[c]) * tinv[c]) * scale + sub)
          << "dx against the twin " << i;
      const float want_dr = add ? static_cast<float>(g[i]) : 0.0f;  // none asked for: none written
      ASSERT_EQ(dr[i], want_dr) << "residual gradient " << i;
    }
    // Eval: constant statistics, no path through them: dx = k g.
    CHECK_CUDA(batchnorm_backward_reduce(dw_.get(), db_.get(), k_.get(), c1_.get(), c2_.get(), dy_.get(),
                                         relu ? y_.get() : nullptr, x_.get(), dt, mean_.get(), invstd_.get(), w_.get(),
                                         false, d, scratch_.get(), bytes, st));
    const auto ek = k_.download(), ec1 = c1_.download(), ec2 = c2_.download();
    for (int64_t c = 0; c < C; ++c) {
      ASSERT_EQ(std::memcmp(&ek[c], &gk[c], 4), 0) << "k is the same " << c;
      ASSERT_EQ(ec1[c], 0.0f);
      ASSERT_EQ(ec2[c], 0.0f);
    }
    CHECK_CUDA(batchnorm_backward_apply(dx_.get(), nullptr, dy_.get(), relu ? y_.get() : nullptr, x_.get(), dt,
                                        mean_.get(), k_.get(), c1_.get(), c2_.get(), d, st));
    const std::vector<float> edx = dx_.values();
    for (int64_t i = 0; i < total; ++i) {
      const double v = static_cast<double>(gk[chan(i)]) * g[i];
      ASSERT_NEAR(edx[i], v, (u + 2 * kF32) * std::fabs(v) + sub) << "eval dx " << i;  // k g in f32, then dt
    }
    EXPECT_TRUE(y_.guards_intact() && dx_.guards_intact() && dr_.guards_intact());
  }
  EXPECT_TRUE(x_.guards_intact() && r_.guards_intact() && dy_.guards_intact() && scratch_.guards_intact());
  EXPECT_TRUE(mean_.guards_intact() && invstd_.guards_intact() && scale_.guards_intact() && rm_.guards_intact() &&
              rv_.guards_intact());
  EXPECT_TRUE(k_.guards_intact() && c1_.guards_intact() && c2_.guards_intact() && dw_.guards_intact() &&
              db_.guards_intact());
}

DP_GPU_TEST_F(CudaBatchnormOwnGpu, ForwardAndBackwardWithEveryEpilogueMatchTheCpuTwin) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  // M = 2 (the least a training batch may have); C odd, above 32 with odd H*W; 1x1 planes; C a
  // multiple of 4 but not 8 (f32 loads 16 bytes channels last, 16-bit data does not); many
  // chunks (more than the finishing warp's 32 lanes).
  for (Sizes sh : {Sizes{1, 1, 2}, Sizes{2, 3, 20}, Sizes{4, 33, 49}, Sizes{3, 64, 1}, Sizes{2, 12, 16},
                   Sizes{16, 40, 196}, Sizes{64, 2, 1024}})
    for (DType dt : {DType::F32, DType::BF16, DType::F16})
      for (bool nhwc : {false, true}) check_own_path(sh, dt, nhwc, 0, gen_, s());
}

DP_GPU_TEST_F(CudaBatchnormOwnGpu, MisalignedPointersTakeTheOneValuePathWithTheSameResults) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (Sizes sh : {Sizes{3, 64, 1}, Sizes{2, 16, 24}})
    for (DType dt : {DType::F32, DType::BF16, DType::F16})
      for (bool nhwc : {false, true}) check_own_path(sh, dt, nhwc, 1, gen_, s());
}

DP_GPU_TEST_F(CudaBatchnormOwnGpu, EpilogueAndMaskAfterCudnnMatchTheCpuBitForBit) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (int64_t n : {1, 7, 8, 9, 31, 1000, 4099})
    for (DType dt : {DType::F32, DType::BF16, DType::F16})
      for (int64_t shift : {0, 1})
        for (bool with_r : {false, true}) {
          SCOPED_TRACE(testing::Message() << n << " " << dtype_name(dt) << (shift ? " misaligned" : "")
                                          << (with_r ? " +r" : ""));
          const BnDims flat{1, 1, n, false};
          std::vector<float> y = test::normal_floats(n, gen_), r = test::normal_floats(n, gen_),
                             dy = test::normal_floats(n, gen_);
          for (auto* v : {&y, &r, &dy})
            for (auto& e : *v) e = test::round_to(e, dt);
          DevAct y_(y, dt, flat, shift, s()), r_(r, dt, flat, shift, s()), dy_(dy, dt, flat, shift, s()),
              g_(std::vector<float>(n, 7.0f), dt, flat, shift, s());
          CHECK_CUDA(batchnorm_epilogue(y_.get(), with_r ? r_.get() : nullptr, dt, n, s()));
          const std::vector<float> out = y_.values();
          for (int64_t i = 0; i < n; ++i) {
            // One f32 addition, the ReLU, one rounding.
            const float v = y[i] + (with_r ? r[i] : 0.0f);
            ASSERT_EQ(out[i], test::round_to(v > 0 ? v : 0.0f, dt)) << i;
          }
          CHECK_CUDA(batchnorm_relu_mask(g_.get(), dy_.get(), y_.get(), dt, n, s()));
          const std::vector<float> g = g_.values();
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], out[i] > 0 ? dy[i] : 0.0f) << i;
          EXPECT_TRUE(y_.guards_intact() && r_.guards_intact() && dy_.guards_intact() && g_.guards_intact());
        }
}

DP_GPU_TEST_F(CudaBatchnormOwnGpu, CoefficientsFromF64StatisticsAreTheirF32Roundings) {
  const int64_t C = 37;
  std::vector<double> mean(C), inv(C);
  const std::vector<float> w = test::normal_floats(C, gen_);
  for (int64_t c = 0; c < C; ++c) mean[c] = std::normal_distribution<double>()(gen_), inv[c] = 0.5 + 0.1 * c;
  test::Guarded<double> mean_(mean, s()), inv_(inv, s());
  test::Guarded<float> w_(w, s()), m_(C, s()), i_(C, s()), sc_(C, s());
  CHECK_CUDA(batchnorm_coefficients(m_.get(), i_.get(), sc_.get(), mean_.get(), inv_.get(), w_.get(), C, s()));
  const auto m = m_.download(), i = i_.download(), sc = sc_.download();
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(m[c], static_cast<float>(mean[c]));
    EXPECT_EQ(i[c], static_cast<float>(inv[c]));
    EXPECT_EQ(sc[c], static_cast<float>(static_cast<double>(w[c]) * inv[c]));
  }
  EXPECT_TRUE(m_.guards_intact() && i_.guards_intact() && sc_.guards_intact());
}

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaBatchnormOwn, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
