// models/layers/layernorm/layernorm_kernels.h against the CPU twin (layernorm_ref.h, run in f64 on
// the values the GPU sees): forward, input gradient, parameter gradients accumulated onto what was
// there, with and without a bias, without an input gradient; f32 and 16-bit rows; guard regions
// catch writes outside. Runs on the CUDA emulator in CI and on a GPU in the runbook.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/half.h"
#include "models/layers/layernorm/layernorm_kernels.h"
#include "models/layers/layernorm/layernorm_ref.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaLayerNorm, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(layernorm_forward(DType::F32, nullptr, nullptr, nullptr, nullptr, -1, 4, 1e-5f, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(layernorm_forward(DType::F32, nullptr, nullptr, nullptr, nullptr, 2, 4, 0.0f, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(layernorm_forward(DType::F64, nullptr, nullptr, nullptr, nullptr, 2, 4, 1e-5f, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(layernorm_forward(DType::BF16, nullptr, nullptr, nullptr, nullptr, 0, 4, 1e-5f, nullptr), cudaSuccess);
  EXPECT_EQ(layernorm_backward(DType::F16, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 3, -1, 1e-5f,
                               nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(layernorm_backward(DType::F32, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 3, 0, 1e-5f,
                               nullptr, nullptr),
            cudaSuccess);
}

// max |a - b| over max |b| (1 when b is all zero).
double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i])), m = std::max(m, std::fabs(b[i]));
  return d / (m > 0 ? m : 1);
}

class CudaLayerNormGpu : public test::GpuTest {
 protected:
  // One case: rows M of C in dtype dt; bias or not; dx or not. tol: the bound of rel_error.
  void check(DType dt, int64_t M, int64_t C, bool bias, bool with_dx, double tol) {
    SCOPED_TRACE(testing::Message() << dtype_name(dt) << " M " << M << " C " << C << (bias ? " bias" : "")
                                    << (with_dx ? "" : " no dx") << " seed " << seed_);
    const int64_t n = M * C;
    const float eps = 1e-5f;
    const bool half = dt != DType::F32;
    auto to16 = [&](float v) { return dt == DType::BF16 ? cpu::f32_to_bf16(v) : cpu::f32_to_f16(v); };
    auto to32 = [&](uint16_t v) { return dt == DType::BF16 ? cpu::bf16_to_f32(v) : cpu::f16_to_f32(v); };
    // Rows with an offset and a scale of their own, so the mean matters.
    std::vector<float> x = test::normal_floats(n, gen_), dy = test::normal_floats(n, gen_);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = 0; c < C; ++c) x[m * C + c] = 3.0f + (1.0f + m % 3) * x[m * C + c];
    std::vector<float> w = test::normal_floats(C, gen_), b = test::normal_floats(C, gen_);
    std::vector<float> dw0 = test::normal_floats(C, gen_), db0 = test::normal_floats(C, gen_);
    std::vector<uint16_t> x16(n), dy16(n);
    if (half)
      for (int64_t i = 0; i < n; ++i) x16[i] = to16(x[i]), dy16[i] = to16(dy[i]), x[i] = to32(x16[i]), dy[i] = to32(dy16[i]);
    // The f64 reference on the same values.
    std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end()), wd(w.begin(), w.end()),
        bd(b.begin(), b.end()), yd(n), dxd(n), dwd(dw0.begin(), dw0.end()), dbd(db0.begin(), db0.end());
    cpu::layernorm_forward<double>(yd.data(), xd.data(), wd.data(), bias ? bd.data() : nullptr, M, C, eps);
    cpu::layernorm_backward<double>(dxd.data(), dwd.data(), bias ? dbd.data() : nullptr, dyd.data(), xd.data(),
                                    wd.data(), M, C, eps);
    test::Guarded<float> w_(w, s()), b_(b, s()), dw_(dw0, s()), db_(db0, s()), stats_(layernorm_backward_scratch_floats(M, C), s());
    std::vector<double> gy(n), gdx(n);
    auto run = [&](void* y, void* dx, const void* xs, const void* dys) {
      CHECK_CUDA(layernorm_forward(dt, y, xs, w_.get(), bias ? b_.get() : nullptr, M, C, eps, s()));
      CHECK_CUDA(layernorm_backward(dt, with_dx ? dx : nullptr, dw_.get(), bias ? db_.get() : nullptr, dys, xs,
                                    w_.get(), M, C, eps, stats_.get(), s()));
    };
    if (half) {
      test::Guarded<uint16_t> x_(x16, s()), dy_(dy16, s()), y_(n, s()), dx_(n, s());
      run(y_.get(), dx_.get(), x_.get(), dy_.get());
      const auto hy = y_.download(), hdx = dx_.download();
      for (int64_t i = 0; i < n; ++i) gy[i] = to32(hy[i]), gdx[i] = to32(hdx[i]);
      EXPECT_TRUE(y_.guards_intact());
      EXPECT_TRUE(dx_.guards_intact());
    } else {
      test::Guarded<float> x_(x, s()), dy_(dy, s()), y_(n, s()), dx_(n, s());
      run(y_.get(), dx_.get(), x_.get(), dy_.get());
      const auto fy = y_.download(), fdx = dx_.download();
      std::copy(fy.begin(), fy.end(), gy.begin());
      std::copy(fdx.begin(), fdx.end(), gdx.begin());
      EXPECT_TRUE(y_.guards_intact());
      EXPECT_TRUE(dx_.guards_intact());
    }
    const auto fdw = dw_.download(), fdb = db_.download();
    EXPECT_LT(rel_error(gy, yd), tol) << "y";
    if (with_dx) {
      EXPECT_LT(rel_error(gdx, dxd), tol) << "dx";
    }
    EXPECT_LT(rel_error(std::vector<double>(fdw.begin(), fdw.end()), dwd), tol) << "dw (accumulated)";
    if (bias) {
      EXPECT_LT(rel_error(std::vector<double>(fdb.begin(), fdb.end()), dbd), tol) << "db (accumulated)";
    } else {
      EXPECT_EQ(fdb, db0) << "db written without a bias";
    }
    EXPECT_TRUE(dw_.guards_intact() && db_.guards_intact() && stats_.guards_intact());
  }
};

DP_GPU_TEST_F(CudaLayerNormGpu, F32RowsMatchTheF64Twin) {
  // C: one element, fewer than a block's threads, more than one pass of them, GPT-2's width.
  check(DType::F32, 1, 1, true, true, 1e-5);
  check(DType::F32, 3, 7, true, true, 1e-5);
  check(DType::F32, 37, 300, false, true, 1e-5);
  check(DType::F32, 5, 768, true, false, 1e-5);
  // Parameter sums over several 64-row chunks and a partial last one.
  check(DType::F32, 150, 67, true, true, 1e-5);
}

// 16-bit rows: the output rounds to 8 (bf16) or 11 (f16) significant bits; the sums stay f32.
DP_GPU_TEST_F(CudaLayerNormGpu, SixteenBitRowsMatchTheTwinAtTheirPrecision) {
  check(DType::BF16, 9, 300, true, true, 1e-2);
  check(DType::F16, 9, 300, false, true, 2e-3);
  check(DType::BF16, 130, 40, true, true, 1e-2);
}

TEST(CudaLayerNorm, ScratchHoldsTheStatisticsAndOnePartialPerChunkAndColumn) {
  EXPECT_EQ(layernorm_backward_scratch_floats(1, 768), 2 + 2 * 768);
  EXPECT_EQ(layernorm_backward_scratch_floats(64, 10), 128 + 20);
  EXPECT_EQ(layernorm_backward_scratch_floats(65, 10), 130 + 40);
  EXPECT_EQ(layernorm_backward_scratch_floats(0, 10), 0);
  EXPECT_EQ(layernorm_backward_scratch_floats(16384, 768), 2 * 16384 + 2 * 256 * 768);
}

}  // namespace
}  // namespace dp::kernels::cuda
#endif
