// models/layers/gelu/gelu_tanh_f32.h, the oneDNN backend's tanh GELU, against the f64 reference
// (gelu_ref.h, PyTorch's formula): forward and backward within f32 rounding at the inputs' scale,
// the same bits on every ISA clone the CPU has and for any thread count, in place equal to out of
// place, NaN kept, and the tails of every vector width.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/rng.h"
#include "kernels/cpu/isa.h"
#include "models/layers/gelu/gelu_ref.h"
#include "models/layers/gelu/gelu_tanh_f32.h"

namespace dp::kernels::cpu {
namespace {

// The CUDA twin's bound (tests/models/layers/gelu/test_gelu_kernels.cpp): f32 math against f64,
// absolute at the inputs' scale.
double bound(double x) { return 4e-7 * (1.0 + x * x); }

std::vector<float> inputs(size_t n, uint64_t seed, float scale) {
  Rng rng(seed, 1);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal()) * scale;
  // The edges: zeros, tiny and denormal inputs, where the sigmoid saturates, and past it.
  const float edges[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-40f, -1e-40f, 0.75f, -0.75f, 5.0f, -5.0f,
                         10.0f, -10.0f, 20.0f, -20.0f, 100.0f, -100.0f, 3e4f, -3e4f};
  for (size_t i = 0; i < std::size(edges) && i < n; ++i) v[i * 7 % n] = edges[i];
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(GeluTanhF32, ForwardAndBackwardMatchTheF64Reference) {
  const size_t n = 100'003;
  const std::vector<float> x = inputs(n, 1, 3.0f), dy = inputs(n, 2, 1.0f);
  std::vector<float> y(n), dx(n);
  gelu_tanh_f32_forward(y.data(), x.data(), n);
  gelu_tanh_f32_backward(dx.data(), dy.data(), x.data(), n);
  std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end()), yr(n), dxr(n);
  gelu_forward<double>(yr.data(), xd.data(), n, true);
  gelu_backward<double>(dxr.data(), dyd.data(), xd.data(), n, true);
  int64_t bad_y = 0, bad_dx = 0;
  double worst_y = 0, worst_dx = 0;  // in units of the bound
  for (size_t i = 0; i < n; ++i) {
    const double ey = std::abs(y[i] - yr[i]), edx = std::abs(dx[i] - dxr[i]);
    const double by = bound(xd[i]), bdx = bound(xd[i]) * (1.0 + std::abs(dyd[i]));
    bad_y += !(ey <= by), bad_dx += !(edx <= bdx);
    worst_y = std::max(worst_y, ey / by), worst_dx = std::max(worst_dx, edx / bdx);
  }
  EXPECT_EQ(bad_y, 0) << "worst forward error " << worst_y << " of the bound";
  EXPECT_EQ(bad_dx, 0) << "worst backward error " << worst_dx << " of the bound";
  std::printf("worst error, in units of 4e-7 (1 + x^2): forward %.3f, backward %.3f\n", worst_y, worst_dx);
  // The saturated ends: gelu(x) = x and gelu'(x) = 1 far right; far left both vanish (the
  // exponential is clamped at e^-87, so they are -1e-36 and -1e-33 where PyTorch's f32 gives -0).
  const float ends[] = {100.0f, -100.0f}, ones[] = {1.0f, 1.0f};
  float ye[2], dxe[2];
  gelu_tanh_f32_forward(ye, ends, 2);
  gelu_tanh_f32_backward(dxe, ones, ends, 2);
  EXPECT_EQ(ye[0], 100.0f);
  EXPECT_EQ(dxe[0], 1.0f);
  EXPECT_TRUE(ye[1] <= 0.0f && ye[1] > -1e-30f) << ye[1];
  EXPECT_TRUE(dxe[1] <= 0.0f && dxe[1] > -1e-30f) << dxe[1];
}

TEST(GeluTanhF32, TheSameBitsOnEveryCloneAndThreadCountInPlaceOrNot) {
  // Lengths: the tails of 16-, 8- and 4-wide vectors, one chunk, and several chunks with a partial one.
  for (size_t n : {size_t{1}, size_t{15}, size_t{17}, size_t{16'384}, size_t{70'001}}) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const std::vector<float> x = inputs(n, 3 + n, 4.0f), dy = inputs(n, 4 + n, 1.0f);
    std::vector<float> y0(n), dx0(n);
    gelu_tanh_f32_forward_on(CloneIsa::Baseline, y0.data(), x.data(), n);
    gelu_tanh_f32_backward_on(CloneIsa::Baseline, dx0.data(), dy.data(), x.data(), n);
    for (CloneIsa isa : {CloneIsa::Avx512, CloneIsa::Avx2, CloneIsa::Baseline}) {
      if (isa > cpu_clone_isa()) continue;
      std::vector<float> y(n), dx(n);
      gelu_tanh_f32_forward_on(isa, y.data(), x.data(), n);
      gelu_tanh_f32_backward_on(isa, dx.data(), dy.data(), x.data(), n);
      EXPECT_TRUE(same_bits(y, y0)) << clone_isa_name(isa);
      EXPECT_TRUE(same_bits(dx, dx0)) << clone_isa_name(isa);
    }
    for (int threads : {1, 2, 3}) {
      const int before = omp_get_max_threads();
      omp_set_num_threads(threads);
      std::vector<float> y = x, dx = dy, dxx = x;
      gelu_tanh_f32_forward(y.data(), y.data(), n);                 // y over x
      gelu_tanh_f32_backward(dx.data(), dx.data(), x.data(), n);    // dx over dy
      gelu_tanh_f32_backward(dxx.data(), dy.data(), dxx.data(), n); // dx over x
      omp_set_num_threads(before);
      EXPECT_TRUE(same_bits(y, y0)) << threads << " threads, in place";
      EXPECT_TRUE(same_bits(dx, dx0)) << threads << " threads, dx over dy";
      EXPECT_TRUE(same_bits(dxx, dx0)) << threads << " threads, dx over x";
    }
  }
}

TEST(GeluTanhF32, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float x[3] = {nan, 1.0f, -nan}, dy[3] = {1.0f, nan, 1.0f};
  float y[3], dx[3];
  gelu_tanh_f32_forward(y, x, 3);
  gelu_tanh_f32_backward(dx, dy, x, 3);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[2]));
  EXPECT_FALSE(std::isnan(y[1]));
  EXPECT_TRUE(std::isnan(dx[0]) && std::isnan(dx[1]) && std::isnan(dx[2]));
}

}  // namespace
}  // namespace dp::kernels::cpu
