// models/layers/conv2d/filter_layout.h against a host permutation: KCRS -> KRSC equals the host's index
// map bit for bit (f32 and 16-bit), and KRSC added back into KCRS equals the host's f32 sum,
// rounded once to bf16/f16 (cpu::f32_to_bf16 / f32_to_f16), bit for bit. Shapes: a plain 3x3,
// 1x1 (the identity map), depthwise (c = 1), a 7x7 stem and one larger than the grid cap.
// Guard regions catch out-of-bounds writes; the GPU cases skip without a GPU.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <array>

#include "base/half.h"
#include "models/layers/conv2d/filter_layout.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaFilterLayout, ArgumentsAreCheckedBeforeAnyLaunch) {
  float* f = nullptr;
  uint16_t* h = nullptr;
  EXPECT_EQ(filter_kcrs_to_krsc(f, f, -1, 1, 1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(filter_kcrs_to_krsc(h, h, 1, -1, 1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(filter_krsc_add_to_kcrs_f32(f, f, 1, 1, -3, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(filter_krsc_add_to_kcrs_bf16(h, h, 1, 1, 1, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(filter_krsc_add_to_kcrs_f16(h, h, -2, 0, 1, 1, nullptr), cudaErrorInvalidValue);
  // An empty filter (any size 0) launches nothing, whatever the pointers.
  EXPECT_EQ(filter_kcrs_to_krsc(f, f, 0, 3, 3, 3, nullptr), cudaSuccess);
  EXPECT_EQ(filter_kcrs_to_krsc(h, h, 4, 0, 3, 3, nullptr), cudaSuccess);
  EXPECT_EQ(filter_krsc_add_to_kcrs_f32(f, f, 4, 3, 0, 3, nullptr), cudaSuccess);
  EXPECT_EQ(filter_krsc_add_to_kcrs_bf16(h, h, 4, 3, 3, 0, nullptr), cudaSuccess);
  EXPECT_EQ(filter_krsc_add_to_kcrs_f16(h, h, 0, 0, 0, 0, nullptr), cudaSuccess);
}

struct FilterShape {
  int64_t k, c, r, s;
  int64_t n() const { return k * c * r * s; }
  // Index of (ki, ci, ri, si) in KCRS and in KRSC memory.
  int64_t kcrs(int64_t ki, int64_t ci, int64_t ri, int64_t si) const { return ((ki * c + ci) * r + ri) * s + si; }
  int64_t krsc(int64_t ki, int64_t ci, int64_t ri, int64_t si) const { return ((ki * r + ri) * s + si) * c + ci; }
};

// 3x3; 1x1; depthwise; ResNet's 7x7 stem; > 2^16 blocks of 256 (the grid-stride loop's second lap).
const std::array<FilterShape, 5> kShapes{{{4, 3, 3, 3}, {5, 6, 1, 1}, {8, 1, 3, 3}, {64, 3, 7, 7}, {512, 512, 9, 9}}};

// The host permutation: krsc[krsc(i)] = kcrs[kcrs(i)].
template <typename T>
std::vector<T> host_kcrs_to_krsc(const std::vector<T>& x, const FilterShape& f) {
  std::vector<T> y(x.size());
  for (int64_t ki = 0; ki < f.k; ++ki)
    for (int64_t ci = 0; ci < f.c; ++ci)
      for (int64_t ri = 0; ri < f.r; ++ri)
        for (int64_t si = 0; si < f.s; ++si) y[f.krsc(ki, ci, ri, si)] = x[f.kcrs(ki, ci, ri, si)];
  return y;
}

class CudaFilterLayoutGpu : public test::GpuTest {
 protected:
  std::vector<uint16_t> random_16bit(int64_t n, bool bf) {
    std::vector<uint16_t> v;
    for (float f : test::normal_floats(static_cast<size_t>(n), gen_)) v.push_back(bf ? cpu::f32_to_bf16(f) : cpu::f32_to_f16(f));
    return v;
  }
};

DP_GPU_TEST_F(CudaFilterLayoutGpu, KcrsToKrscIsTheHostPermutation) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (const FilterShape& f : kShapes) {
    SCOPED_TRACE(testing::Message() << "k " << f.k << " c " << f.c << " r " << f.r << " s " << f.s);
    const auto x = test::normal_floats(static_cast<size_t>(f.n()), gen_);
    test::Guarded<float> x_(x, s()), y_(x.size(), s());
    CHECK_CUDA(filter_kcrs_to_krsc(y_.get(), x_.get(), f.k, f.c, f.r, f.s, s()));
    const auto y = y_.download();
    const auto want = host_kcrs_to_krsc(x, f);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(test::same_bits(y[i], want[i])) << i;
    EXPECT_TRUE(y_.guards_intact());

    const auto h = random_16bit(f.n(), true);
    test::Guarded<uint16_t> h_(h, s()), g_(h.size(), s());
    CHECK_CUDA(filter_kcrs_to_krsc(g_.get(), h_.get(), f.k, f.c, f.r, f.s, s()));
    EXPECT_EQ(g_.download(), host_kcrs_to_krsc(h, f));
    EXPECT_TRUE(g_.guards_intact());
  }
}

DP_GPU_TEST_F(CudaFilterLayoutGpu, KrscAddedIntoKcrsIsTheHostSumRoundedOnce) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (const FilterShape& f : kShapes) {
    SCOPED_TRACE(testing::Message() << "k " << f.k << " c " << f.c << " r " << f.r << " s " << f.s);
    const size_t n = static_cast<size_t>(f.n());
    {  // f32
      const auto acc = test::normal_floats(n, gen_), dw_kcrs = test::normal_floats(n, gen_);
      const auto dw = host_kcrs_to_krsc(dw_kcrs, f);  // the KRSC gradient whose KCRS order is dw_kcrs
      test::Guarded<float> y_(acc, s()), x_(dw, s());
      CHECK_CUDA(filter_krsc_add_to_kcrs_f32(y_.get(), x_.get(), f.k, f.c, f.r, f.s, s()));
      const auto y = y_.download();
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(test::same_bits(y[i], acc[i] + dw_kcrs[i])) << i;
      EXPECT_TRUE(y_.guards_intact());
      EXPECT_EQ(x_.download(), dw);  // the source is left as it was
    }
    for (bool bf : {true, false}) {
      SCOPED_TRACE(bf ? "bf16" : "f16");
      const auto widen = [bf](uint16_t v) { return bf ? cpu::bf16_to_f32(v) : cpu::f16_to_f32(v); };
      const auto acc = random_16bit(f.n(), bf), dw_kcrs = random_16bit(f.n(), bf);
      const auto dw = host_kcrs_to_krsc(dw_kcrs, f);
      test::Guarded<uint16_t> y_(acc, s()), x_(dw, s());
      CHECK_CUDA((bf ? filter_krsc_add_to_kcrs_bf16 : filter_krsc_add_to_kcrs_f16)(y_.get(), x_.get(), f.k, f.c, f.r,
                                                                                   f.s, s()));
      const auto y = y_.download();
      for (size_t i = 0; i < n; ++i) {
        const float sum = widen(acc[i]) + widen(dw_kcrs[i]);
        ASSERT_EQ(y[i], bf ? cpu::f32_to_bf16(sum) : cpu::f32_to_f16(sum)) << i;
      }
      EXPECT_TRUE(y_.guards_intact());
    }
  }
}

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaFilterLayout, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
