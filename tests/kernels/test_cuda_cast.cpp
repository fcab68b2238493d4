// kernels/cuda/cast.h against base/half.h: every one of the 65536 bf16 and f16 values
// widened to f32, and f32 values (random bits, halfway cases, subnormals, overflow, inf, NaN)
// narrowed, equal the CPU conversion bit for bit except that a NaN only has to stay a NaN;
// and the dynamic-loss-scaling unscale of fp16 gradients as the product runs it (the reducer
// widens f16 -> f32 into the arena, then f32 * 1/scale in place, exact: one multiply) with its
// found-inf flag. Guard regions catch out-of-bounds writes; everything skips without a GPU.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>
#include <limits>

#include "base/half.h"
#include "kernels/cuda/cast.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaCast, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(f32_to_bf16(nullptr, nullptr, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(f16_to_f32(nullptr, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(unscale_f32(nullptr, -2, 0.5f, nullptr, nullptr), cudaErrorInvalidValue);
  // The by-dtype entries take the 16-bit compute dtypes only.
  EXPECT_EQ(narrow_from_f32(DType::F32, nullptr, nullptr, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(widen_to_f32(DType::I32, nullptr, nullptr, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(widen_to_f32(DType::BF16, nullptr, nullptr, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(narrow_from_f32(DType::F16, nullptr, nullptr, 0, nullptr), cudaSuccess);
}

class CudaCastGpu : public test::GpuTest {};

// narrow_from_f32 / widen_to_f32 by dtype are the typed conversions: the same bits.
DP_GPU_TEST_F(CudaCastGpu, ByDtypeEntriesEqualTheTypedConversions) {
  const cudaStream_t s = stream_.get();
  const std::vector<float> f = test::normal_floats(301, gen_);
  for (DType dt : {DType::BF16, DType::F16}) {
    test::Guarded<float> f_(f, s), back_(f.size(), s);
    test::Guarded<uint16_t> h_(f.size(), s);
    CHECK_CUDA(narrow_from_f32(dt, h_.get(), f_.get(), 301, s));
    CHECK_CUDA(widen_to_f32(dt, back_.get(), h_.get(), 301, s));
    const auto h = h_.download();
    const auto back = back_.download();
    int64_t bad = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t want = dt == DType::BF16 ? cpu::f32_to_bf16(f[i]) : cpu::f32_to_f16(f[i]);
      bad += h[i] != want;
      bad += !test::same_bits(back[i], dt == DType::BF16 ? cpu::bf16_to_f32(want) : cpu::f16_to_f32(want));
    }
    EXPECT_EQ(bad, 0) << dtype_name(dt);
    EXPECT_TRUE(h_.guards_intact() && back_.guards_intact());
  }
}


std::vector<uint16_t> all_16bit() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

DP_GPU_TEST_F(CudaCastGpu, WideningEvery16BitValueIsExact) {
  const cudaStream_t s = stream_.get();
  const auto h = all_16bit();
  test::Guarded<uint16_t> h_(h, s);
  test::Guarded<float> f_(h.size(), s);
  for (bool bf : {true, false}) {
    CHECK_CUDA((bf ? bf16_to_f32 : f16_to_f32)(f_.get(), h_.get(), static_cast<int64_t>(h.size()), s));
    const auto f = f_.download();
    for (size_t i = 0; i < h.size(); ++i) {
      const float want = bf ? cpu::bf16_to_f32(h[i]) : cpu::f16_to_f32(h[i]);
      if (std::isnan(want))
        ASSERT_TRUE(std::isnan(f[i])) << (bf ? "bf16 " : "f16 ") << i;
      else
        ASSERT_TRUE(test::same_bits(f[i], want)) << (bf ? "bf16 " : "f16 ") << i << ": " << f[i] << " vs " << want;
    }
    EXPECT_TRUE(f_.guards_intact());
  }
}

DP_GPU_TEST_F(CudaCastGpu, NarrowingRoundsToNearestEvenAsTheCpu) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  std::vector<float> f;
  for (int i = 0; i < 1 << 20; ++i) f.push_back(cpu::f32_from_bits(static_cast<uint32_t>(gen_())));  // any bits
  for (uint32_t h = 0; h < 65536; ++h) {  // every halfway point between neighbouring 16-bit values
    f.push_back(cpu::f32_from_bits((h << 16) | 0x8000u));
    f.push_back(cpu::f32_from_bits(cpu::f32_bits(cpu::f16_to_f32(static_cast<uint16_t>(h))) + 0x1000u));
  }
  for (float x : {0.0f, -0.0f, 65504.0f, 65520.0f, 65519.99f, 1e-8f, 5.9604645e-8f, 2.9802322e-8f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::quiet_NaN()})
    f.push_back(x), f.push_back(-x);
  const int64_t n = static_cast<int64_t>(f.size());
  test::Guarded<float> f_(f, s);
  test::Guarded<uint16_t> h_(n, s);
  for (bool bf : {true, false}) {
    CHECK_CUDA((bf ? f32_to_bf16 : f32_to_f16)(h_.get(), f_.get(), n, s));
    const auto h = h_.download();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = bf ? cpu::f32_to_bf16(f[i]) : cpu::f32_to_f16(f[i]);
      const bool ok = std::isnan(f[i]) ? std::isnan(bf ? cpu::bf16_to_f32(h[i]) : cpu::f16_to_f32(h[i]))
                                       : h[i] == want;
      if (!ok && bad++ < 5) ADD_FAILURE() << (bf ? "bf16(" : "f16(") << f[i] << "): " << h[i] << " vs " << want;
    }
    EXPECT_EQ(bad, 0);
    EXPECT_TRUE(h_.guards_intact());
  }
}

DP_GPU_TEST_F(CudaCastGpu, UnscaleMultipliesEveryElementAndFlagsInfOrNaN) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  const int64_t n = (int64_t{1} << 20) + 3;
  const float inv_scale = 1.0f / 65536.0f;
  std::vector<uint16_t> h(n);
  for (auto& v : h) {
    v = cpu::f32_to_f16(test::normal_floats(1, gen_, 1000.0f)[0]);
    if ((v & 0x7C00u) == 0x7C00u) v = 0x3C00u;  // finite values only for the clean pass
  }
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = cpu::f16_to_f32(h[i]) * inv_scale;
  for (int bad_kind = 0; bad_kind < 3; ++bad_kind) {  // clean, one inf, one NaN
    SCOPED_TRACE(testing::Message() << "kind " << bad_kind);
    std::vector<uint16_t> x = h;
    const int64_t at = static_cast<int64_t>(gen_() % n);
    if (bad_kind == 1) x[at] = 0xFC00u;  // -inf
    if (bad_kind == 2) x[at] = 0x7E00u;  // NaN
    test::Guarded<uint16_t> x_(x, s);
    test::Guarded<float> y_(n, s), flag_(std::vector<float>{0.0f}, s);
    CHECK_CUDA(f16_to_f32(y_.get(), x_.get(), n, s));
    CHECK_CUDA(unscale_f32(y_.get(), n, inv_scale, flag_.get(), s));
    const auto y = y_.download();
    EXPECT_EQ(flag_.download()[0], bad_kind == 0 ? 0.0f : 1.0f);
    for (int64_t i = 0; i < n; ++i)
      if (bad_kind == 0 || i != at) {
        ASSERT_TRUE(test::same_bits(y[i], want[i])) << i;
      }
    EXPECT_TRUE(y_.guards_intact());
    EXPECT_TRUE(flag_.guards_intact());

    // f32 in place, over the widened values: same products, same flag.
    std::vector<float> g(n);
    for (int64_t i = 0; i < n; ++i) g[i] = cpu::f16_to_f32(x[i]);
    test::Guarded<float> g_(g, s), flag2_(std::vector<float>{0.0f}, s);
    CHECK_CUDA(unscale_f32(g_.get(), n, inv_scale, flag2_.get(), s));
    const auto g2 = g_.download();
    EXPECT_EQ(flag2_.download()[0], bad_kind == 0 ? 0.0f : 1.0f);
    for (int64_t i = 0; i < n; ++i)
      if (bad_kind == 0 || i != at) {
        ASSERT_TRUE(test::same_bits(g2[i], want[i])) << i;
      }
    EXPECT_TRUE(g_.guards_intact());
  }
}

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaCast, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
