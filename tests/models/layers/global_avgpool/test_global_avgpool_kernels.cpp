// models/layers/global_avgpool/global_avgpool_kernels.h against the CPU twin (kernels/cpu/pool2d.h, in double on the
// values the GPU sees). The kernel sums each plane in f32: its error is at most HW f32 rounding
// units of the plane's sum of magnitudes (a loose bound; the fixed order makes it deterministic),
// plus one rounding of the output to its dtype. The backward is one f32 division, then (bf16,
// f16) the rounding of that quotient to the dtype: within u32 |dx| + u |dx| + u32 |dx| (the second
// rounding starts from the rounded quotient), plus, below the dtype's normal range, half its
// subnormal spacing (f16's dx under 2^-14 are multiples of 2^-24). Guard regions catch
// out-of-bounds writes.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>

#include "kernels/cpu/pool2d.h"
#include "models/layers/global_avgpool/global_avgpool_kernels.h"
#include "tests/kernels/cuda_dtype_layout.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaGlobalAvgpool, ArgumentsAreCheckedBeforeAnyLaunch) {
  void* fake = reinterpret_cast<void*>(uintptr_t{64});
  EXPECT_EQ(global_avgpool_forward(fake, fake, DType::F32, -1, 3, 4, false, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(global_avgpool_forward(fake, fake, DType::F32, 2, -3, 4, true, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(global_avgpool_forward(fake, fake, DType::F32, 2, 3, 0, false, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(global_avgpool_forward(fake, fake, DType::F64, 2, 3, 4, false, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(global_avgpool_forward(nullptr, nullptr, DType::BF16, 0, 3, 4, true, nullptr), cudaSuccess);
  EXPECT_EQ(global_avgpool_backward(fake, fake, DType::I32, 2, 3, 4, false, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(global_avgpool_backward(fake, fake, DType::F16, 2, 3, 0, true, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(global_avgpool_backward(nullptr, nullptr, DType::F16, 2, 0, 4, true, nullptr), cudaSuccess);
}

class CudaGlobalAvgpoolGpu : public test::GpuTest {};

DP_GPU_TEST_F(CudaGlobalAvgpoolGpu, ForwardAndBackwardMatchTheCpuTwin) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t st = s();
  struct Case {
    int64_t N, C, HW;
  };
  // Planes shorter and longer than a warp; C around a warp; many planes.
  for (Case c : {Case{1, 1, 1}, Case{2, 3, 20}, Case{3, 33, 49}, Case{2, 5, 3136}, Case{64, 512, 49}})
    for (DType dt : {DType::F32, DType::BF16, DType::F16})
      for (bool nhwc : {false, true}) {
        SCOPED_TRACE(testing::Message() << c.N << "x" << c.C << "x" << c.HW << " " << dtype_name(dt)
                                        << (nhwc ? " nhwc" : " nchw"));
        const int64_t NC = c.N * c.C, total = NC * c.HW;
        std::vector<float> x = test::normal_floats(total, gen_), dy = test::normal_floats(NC, gen_);
        for (auto& v : x) v = test::round_to(v, dt);
        for (auto& v : dy) v = test::round_to(v, dt);
        const std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end());
        std::vector<double> yref(NC), dxref(total);
        cpu::global_avgpool_forward<double>(yref.data(), xd.data(), NC, c.HW);
        cpu::global_avgpool_backward<double>(dxref.data(), dyd.data(), NC, c.HW);

        test::Guarded<uint8_t> x_(test::encode(x, dt, c.N, c.C, c.HW, nhwc), st);
        test::Guarded<uint8_t> dy_(test::encode(dy, dt, c.N, c.C, 1, false), st);  // (N, C): layout-free
        test::Guarded<uint8_t> y_(NC * dtype_size(dt), st), dx_(total * dtype_size(dt), st);
        CHECK_CUDA(global_avgpool_forward(y_.get(), x_.get(), dt, c.N, c.C, c.HW, nhwc, st));
        CHECK_CUDA(global_avgpool_backward(dx_.get(), dy_.get(), dt, c.N, c.C, c.HW, nhwc, st));
        const auto y = test::decode(y_.download(), dt, c.N, c.C, 1, false);
        const auto dx = test::decode(dx_.download(), dt, c.N, c.C, c.HW, nhwc);
        const double u = test::unit_roundoff(dt), u32 = test::unit_roundoff(DType::F32);
        for (int64_t p = 0; p < NC; ++p) {
          double mag = 0;
          for (int64_t i = 0; i < c.HW; ++i) mag += std::fabs(xd[p * c.HW + i]);
          // The sum's error (HW u32 mag at most) divided by HW, plus the output's rounding.
          const double tol = u * std::fabs(yref[p]) + u32 * mag + 1e-7;
          ASSERT_NEAR(y[p], yref[p], tol) << "plane " << p;
        }
        const double dx_rel = dt == DType::F32 ? u32 : u + 2 * u32, dx_abs = test::subnormal_half_spacing(dt);
        for (int64_t i = 0; i < total; ++i) ASSERT_NEAR(dx[i], dxref[i], dx_rel * std::fabs(dxref[i]) + dx_abs) << i;
        // Deterministic: the same input gives the same bits.
        const auto first = y_.download();
        CHECK_CUDA(global_avgpool_forward(y_.get(), x_.get(), dt, c.N, c.C, c.HW, nhwc, st));
        EXPECT_EQ(y_.download(), first);
        EXPECT_TRUE(y_.guards_intact() && dx_.guards_intact() && x_.guards_intact() && dy_.guards_intact());
      }
}

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaGlobalAvgpool, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
