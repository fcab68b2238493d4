// models/layers/gelu/gelu_kernels.h against the CPU twin (models/layers/gelu/gelu_ref.h, f64 math)
// in both forms (tanh, erf), f32 and 16-bit, aligned and misaligned (the vector split's head and
// tail), in place (dx over dy or over x); guard regions catch writes outside. Runs on the CUDA emulator in CI and on a
// GPU in the runbook; skips without either.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>
#include <random>
#include <vector>

#include "base/half.h"
#include "models/layers/gelu/gelu_kernels.h"
#include "models/layers/gelu/gelu_ref.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaGelu, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(gelu_forward(DType::F32, nullptr, nullptr, -1, true, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(gelu_forward(DType::F64, nullptr, nullptr, 4, true, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(gelu_forward(DType::BF16, nullptr, nullptr, 0, false, nullptr), cudaSuccess);
  EXPECT_EQ(gelu_backward(DType::I32, nullptr, nullptr, nullptr, 4, true, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(gelu_backward(DType::F16, nullptr, nullptr, nullptr, -1, true, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(gelu_backward(DType::F32, nullptr, nullptr, nullptr, 0, false, nullptr), cudaSuccess);
}

// f32 in f32 math against f64 math rounded to f32: tanhf / erff / expf are within 2 ulps, and
// 1 + tanh(u) cancels for negative x, so the bound is absolute at the inputs' scale.
float f32_bound(float x) { return 4e-7f * (1.0f + std::fabs(x) * std::fabs(x)); }

struct Form {
  bool tanh;
  const char* name;
};
constexpr Form kForms[] = {{true, "tanh"}, {false, "erf"}};

class CudaGeluGpu : public test::GpuTest {};

DP_GPU_TEST_F(CudaGeluGpu, F32ForwardAndBackwardMatchTheCpuTwin) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (const Form f : kForms) {
    // n: one element, a head and a tail around vectors, more vectors than one block handles.
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1029}, int64_t{4099}}) {
      for (int64_t offset : {int64_t{0}, int64_t{1}}) {  // 1: every operand misaligned by one element
        SCOPED_TRACE(testing::Message() << f.name << " n " << n << " offset " << offset);
        auto x = test::normal_floats(n + offset, gen_, 3.0f), dy = test::normal_floats(n + offset, gen_);
        std::vector<float> y(n), dx(n);
        cpu::gelu_forward<float>(y.data(), x.data() + offset, n, f.tanh);
        cpu::gelu_backward<float>(dx.data(), dy.data() + offset, x.data() + offset, n, f.tanh);
        test::Guarded<float> x_(x, s()), dy_(dy, s()), y_(n + offset, s()), dx_(n + offset, s());
        CHECK_CUDA(gelu_forward(DType::F32, y_.get() + offset, x_.get() + offset, n, f.tanh, s()));
        CHECK_CUDA(gelu_backward(DType::F32, dx_.get() + offset, dy_.get() + offset, x_.get() + offset, n, f.tanh, s()));
        const auto gy = y_.download(), gdx = dx_.download();
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          const float xi = x[offset + i];
          bad += !(std::fabs(gy[offset + i] - y[i]) <= f32_bound(xi));
          bad += !(std::fabs(gdx[offset + i] - dx[i]) <= f32_bound(xi) * (1.0f + std::fabs(dy[offset + i])));
        }
        EXPECT_EQ(bad, 0);
        EXPECT_TRUE(y_.guards_intact());
        EXPECT_TRUE(dx_.guards_intact());
        // dx over x (how a linear layer with a folded GELU turns its kept input into the gradient).
        test::Guarded<float> xg_(x, s());
        CHECK_CUDA(gelu_backward(DType::F32, xg_.get() + offset, dy_.get() + offset, xg_.get() + offset, n, f.tanh, s()));
        const auto gxg = xg_.download();
        int64_t differ_x = 0;
        for (int64_t i = 0; i < n; ++i) differ_x += !test::same_bits(gxg[offset + i], gdx[offset + i]);
        EXPECT_EQ(differ_x, 0) << "dx written over x differs from out of place";
        // In place: y over x, dx over dy.
        CHECK_CUDA(gelu_backward(DType::F32, dy_.get() + offset, dy_.get() + offset, x_.get() + offset, n, f.tanh, s()));
        CHECK_CUDA(gelu_forward(DType::F32, x_.get() + offset, x_.get() + offset, n, f.tanh, s()));
        const auto ix = x_.download(), idy = dy_.download();
        int64_t differ = 0;
        for (int64_t i = 0; i < n; ++i)
          differ += !test::same_bits(ix[offset + i], gy[offset + i]) || !test::same_bits(idy[offset + i], gdx[offset + i]);
        EXPECT_EQ(differ, 0) << "in place differs from out of place";
      }
    }
  }
}

// 16-bit: the twin on the widened inputs, rounded once. The kernel's f32 result carries the f32
// error above, which near zero (GELU of a negative x, a gradient near 0) spans many 16-bit steps,
// so the bound is that error plus one step of the format at the twin's value.
DP_GPU_TEST_F(CudaGeluGpu, SixteenBitRoundsTheF32ResultOnce) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (DType dt : {DType::BF16, DType::F16}) {
    for (const Form f : kForms) {
      const int64_t n = 2053;
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " " << f.name);
      auto to16 = [&](float v) { return dt == DType::BF16 ? cpu::f32_to_bf16(v) : cpu::f32_to_f16(v); };
      auto to32 = [&](uint16_t v) { return dt == DType::BF16 ? cpu::bf16_to_f32(v) : cpu::f16_to_f32(v); };
      const auto xf = test::normal_floats(n, gen_, 3.0f), dyf = test::normal_floats(n, gen_);
      std::vector<uint16_t> x(n), dy(n);
      std::vector<float> xr(n), dyr(n), y(n), dx(n);
      for (int64_t i = 0; i < n; ++i) x[i] = to16(xf[i]), dy[i] = to16(dyf[i]), xr[i] = to32(x[i]), dyr[i] = to32(dy[i]);
      cpu::gelu_forward<float>(y.data(), xr.data(), n, f.tanh);
      cpu::gelu_backward<float>(dx.data(), dyr.data(), xr.data(), n, f.tanh);
      test::Guarded<uint16_t> x_(x, s()), dy_(dy, s()), y_(n, s()), dx_(n, s());
      CHECK_CUDA(gelu_forward(dt, y_.get(), x_.get(), n, f.tanh, s()));
      CHECK_CUDA(gelu_backward(dt, dx_.get(), dy_.get(), x_.get(), n, f.tanh, s()));
      const auto gy = y_.download(), gdx = dx_.download();
      auto step = [&](float v) {  // one step of the format at |v|
        const uint16_t m = to16(std::fabs(v));
        return to32(static_cast<uint16_t>(m + 1)) - to32(m);
      };
      int64_t bad = 0, exact = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float ey = f32_bound(xr[i]), edx = f32_bound(xr[i]) * (1.0f + std::fabs(dyr[i]));
        bad += !(std::fabs(to32(gy[i]) - y[i]) <= ey + step(y[i]));
        bad += !(std::fabs(to32(gdx[i]) - dx[i]) <= edx + step(dx[i]));
        exact += gy[i] == to16(y[i]) && gdx[i] == to16(dx[i]);
      }
      EXPECT_EQ(bad, 0) << "elements beyond the f32 error and one 16-bit step from the twin";
      // Exact share over 150 random seeds (2026-11-27, emulator): f16 tanh 89.2-92.7% (mean 91.2%),
      // bf16 tanh 91.0-94.4%, erf 92.5-96.4%; 90% failed about one seed in 30. 85% sits some ten
      // standard deviations below the means, and still fails a kernel one step off in more than one
      // element in seven.
      EXPECT_GE(exact, n * 85 / 100) << "most elements round to the twin's value exactly";
      EXPECT_TRUE(y_.guards_intact());
      EXPECT_TRUE(dx_.guards_intact());
    }
  }
}

}  // namespace
}  // namespace dp::kernels::cuda
#endif
