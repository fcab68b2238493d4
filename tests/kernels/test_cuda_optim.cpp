// kernels/cuda/optim.h against the CPU twins (kernels/cpu/optim_sgd.h, optim_adamw.h). The
// element functions the kernels run (kernels/optim_math.h) are host-callable: here they
// must equal the twins bit for bit on fresh random inputs, without a GPU. On a GPU the fused
// kernels over a whole arena must equal the twins within 1 ulp per element after 3 steps (0 is
// expected: the device pass rounds every operation as the twin's source reads; the 1 ulp leaves
// room for a host compiler that contracted a multiply-add in the twin).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/optim_adamw.h"
#include "kernels/cpu/optim_sgd.h"
#include "kernels/optim_math.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "kernels/cuda/optim.h"
#include "tests/kernels/cuda_test_util.h"
#endif

namespace dp::kernels::cuda {
namespace {

bool same(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

std::vector<SgdScalars> sgd_cases() {
  std::vector<SgdScalars> out;
  for (float wd : {0.0f, 5e-4f})
    for (float mom : {0.0f, 0.9f})
      for (float damp : {0.0f, 0.1f})
        for (bool nesterov : {false, true})
          for (bool first : {true, false}) {
            if (nesterov && (mom == 0.0f || damp != 0.0f)) continue;  // torch refuses these
            out.push_back({-0.1f, wd, mom, 1.0f - damp, nesterov, first});
          }
  return out;
}

// torch's scalars for step t (runtime/optim/adamw.cpp computes them the same way).
AdamWScalars adamw_scalars(double lr, double b1, double b2, double eps, double wd, int t) {
  AdamWScalars s;
  s.apply_decay = wd != 0;
  s.decay = static_cast<float>(1.0 - lr * wd);
  s.one_minus_beta1 = static_cast<float>(1.0 - b1);
  s.beta2 = static_cast<float>(b2);
  s.one_minus_beta2 = static_cast<float>(1.0 - b2);
  s.bias_correction2_sqrt = static_cast<float>(std::pow(1.0 - std::pow(b2, t), 0.5));
  s.neg_step_size = static_cast<float>(-(lr / (1.0 - std::pow(b1, t))));
  s.eps = static_cast<float>(eps);
  return s;
}

std::vector<AdamWScalars> adamw_cases() {
  std::vector<AdamWScalars> out;
  for (int t : {1, 2, 1000})
    for (double wd : {0.0, 0.01})
      for (double b1 : {0.9, 0.3})  // 0.3: 1 - beta1 >= 0.5, at::lerp's other formula
        out.push_back(adamw_scalars(1e-3, b1, 0.999, 1e-8, wd, t));
  return out;
}

TEST(CudaOptimMath, SgdElementEqualsTheCpuTwinBitForBit) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  constexpr int64_t n = 4099;
  for (const auto& s : sgd_cases()) {
    std::vector<float> p(n), gr(n), buf(n);
    for (int64_t i = 0; i < n; ++i) p[i] = d(g), gr[i] = d(g) * 1e-2f, buf[i] = d(g) * 1e-2f;
    std::vector<float> p2 = p, buf2 = buf;
    cpu::sgd_step(p.data(), gr.data(), s.momentum != 0.0f ? buf.data() : nullptr, n, s);
    for (int64_t i = 0; i < n; ++i) {
      sgd_update(p2[i], gr[i], buf2[i], s);
      ASSERT_TRUE(same(p2[i], p[i])) << i << ": " << p2[i] << " vs " << p[i] << " momentum " << s.momentum
                                     << " nesterov " << s.nesterov << " first " << s.first_step;
      ASSERT_TRUE(same(buf2[i], buf[i])) << i;
    }
  }
}

TEST(CudaOptimMath, AdamWElementEqualsTheCpuTwinBitForBit) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  constexpr int64_t n = 4099;
  for (const auto& s : adamw_cases()) {
    std::vector<float> p(n), gr(n), m(n), v(n);
    for (int64_t i = 0; i < n; ++i)
      p[i] = d(g), gr[i] = d(g) * 1e-2f, m[i] = d(g) * 1e-3f, v[i] = std::fabs(d(g)) * 1e-5f;
    std::vector<float> p2 = p, m2 = m, v2 = v;
    cpu::adamw_step(p.data(), gr.data(), m.data(), v.data(), n, s);
    for (int64_t i = 0; i < n; ++i) {
      adamw_update(p2[i], gr[i], m2[i], v2[i], s);
      ASSERT_TRUE(same(p2[i], p[i])) << i << ": " << p2[i] << " vs " << p[i];
      ASSERT_TRUE(same(m2[i], m[i])) << i;
      ASSERT_TRUE(same(v2[i], v[i])) << i;
    }
  }
}

// decay_skipped (the fused kernels' per-element lookup) against a linear scan of the spans.
TEST(CudaOptimMath, DecaySkippedFindsExactlyTheElementsOfTheSpans) {
  const std::vector<int64_t> bounds = {3, 5, 5, 6, 10, 20, 40, 41};  // [3, 5) [5, 6) [10, 20) [40, 41)
  const DecaySkips d{bounds.data(), 4};
  for (int64_t i = -1; i < 50; ++i) {
    bool in = false;
    for (size_t k = 0; k < bounds.size(); k += 2) in = in || (i >= bounds[k] && i < bounds[k + 1]);
    EXPECT_EQ(decay_skipped(d, i), in) << i;
  }
  EXPECT_FALSE(decay_skipped(DecaySkips{}, 0));
}

#ifdef DPTRAIN_HAVE_CUDA
TEST(CudaOptim, ArgumentsAreCheckedBeforeAnyLaunch) {
  SgdScalars s;
  s.momentum = 0.9f;
  EXPECT_EQ(sgd_step(nullptr, nullptr, nullptr, 10, s, nullptr), cudaErrorInvalidValue);  // momentum needs buf
  EXPECT_EQ(sgd_step(nullptr, nullptr, nullptr, -1, SgdScalars{}, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(sgd_step(nullptr, nullptr, nullptr, 0, SgdScalars{}, nullptr), cudaSuccess);
  EXPECT_EQ(adamw_step(nullptr, nullptr, nullptr, nullptr, -1, AdamWScalars{}, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(adamw_step(nullptr, nullptr, nullptr, nullptr, 4, AdamWScalars{}, nullptr, {}, DecaySkips{nullptr, 2}),
            cudaErrorInvalidValue);  // spans without bounds
  EXPECT_EQ(sgd_step(nullptr, nullptr, nullptr, 4, SgdScalars{}, nullptr, {}, DecaySkips{nullptr, -1}),
            cudaErrorInvalidValue);
}

// train.decay_params = "matrices": one launch over the arena, each element looking up its span,
// equals the CPU twin's runs of the same spans bit for bit.
DP_GPU_TEST(CudaOptimGpu, FusedUpdatesWithDecaySkipsEqualTheCpuTwin) {
  dp::cuda::CudaStream stream(0);
  const cudaStream_t st = stream.get();
  const uint64_t seed = test::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 g(seed);
  const int64_t n = 60013;
  std::vector<int64_t> bounds;  // spans of random lengths, alternating with decayed runs
  std::uniform_int_distribution<int64_t> len(1, 700);
  for (int64_t at = len(g); at < n;) {
    const int64_t end = std::min(n, at + len(g));
    bounds.push_back(at), bounds.push_back(end);
    at = end + len(g);
  }
  const DecaySkips host{bounds.data(), static_cast<int32_t>(bounds.size() / 2)};
  test::Guarded<int64_t> bounds_(bounds, st);
  const DecaySkips dev{bounds_.get(), host.count};
  for (bool adam : {true, false}) {
    auto p = test::normal_floats(n, g);
    const auto p0 = p;
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    test::Guarded<float> p_(p, st), m_(m, st), v_(v, st), g_(n, st);
    SgdScalars sgd{-0.1f, 0.05f, 0.9f, 1.0f, false, true};
    for (int t = 1; t <= 3; ++t) {
      const auto grad = test::normal_floats(n, g, 1e-2f);
      g_.upload(grad);
      if (adam) {
        const auto sc = adamw_scalars(1e-2, 0.9, 0.999, 1e-8, 0.5, t);
        cpu::adamw_step(p.data(), grad.data(), m.data(), v.data(), n, sc, host);
        CHECK_CUDA(adamw_step(p_.get(), g_.get(), m_.get(), v_.get(), n, sc, st, {}, dev));
      } else {
        sgd.first_step = t == 1;
        cpu::sgd_step(p.data(), grad.data(), m.data(), n, sgd, host);
        CHECK_CUDA(sgd_step(p_.get(), g_.get(), m_.get(), n, sgd, st, {}, dev));
      }
    }
    const auto got = p_.download();
    int64_t exact = 0;
    for (int64_t i = 0; i < n; ++i) exact += test::same_bits(got[i], p[i]);
    EXPECT_EQ(exact, n) << (adam ? "adamw" : "sgd") << ": elements equal to the CPU twin's bit for bit";
    EXPECT_TRUE(p_.guards_intact() && m_.guards_intact() && bounds_.guards_intact());
  }
}

void expect_within_ulp(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  int64_t bad = 0, exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    exact += test::same_bits(got[i], want[i]);
    if (test::ulp_distance(got[i], want[i]) <= 1) continue;
    if (bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << want[i];
  }
  EXPECT_EQ(bad, 0) << what;
  ::testing::Test::RecordProperty(std::string(what) + "_exact", std::to_string(exact) + "/" + std::to_string(got.size()));
}

DP_GPU_TEST(CudaOptimGpu, FusedSgdOverAnArenaEqualsTheCpuTwin) {
  dp::cuda::CudaStream stream(0);
  const cudaStream_t st = stream.get();
  const uint64_t seed = test::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 g(seed);
  const int64_t n = (int64_t{1} << 21) + 17;  // ~2M parameters, not a multiple of anything
  for (auto s : sgd_cases()) {
    if (!s.first_step) continue;  // the 3 steps below go first, then not
    auto p = test::normal_floats(n, g);
    std::vector<float> buf(n, 0.0f);
    test::Guarded<float> p_(p, st), buf_(buf, st), g_(n, st);
    for (int step = 0; step < 3; ++step) {
      s.first_step = step == 0;
      const auto grad = test::normal_floats(n, g, 1e-2f);
      g_.upload(grad);
      cpu::sgd_step(p.data(), grad.data(), s.momentum != 0.0f ? buf.data() : nullptr, n, s);
      CHECK_CUDA(sgd_step(p_.get(), g_.get(), buf_.get(), n, s, st));
    }
    expect_within_ulp(p_.download(), p, "sgd p");
    expect_within_ulp(buf_.download(), buf, "sgd buf");
    EXPECT_TRUE(p_.guards_intact());
    EXPECT_TRUE(buf_.guards_intact());
  }
}

DP_GPU_TEST(CudaOptimGpu, FusedAdamWOverAnArenaEqualsTheCpuTwin) {
  dp::cuda::CudaStream stream(0);
  const cudaStream_t st = stream.get();
  const uint64_t seed = test::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 g(seed);
  const int64_t n = (int64_t{1} << 21) + 17;
  for (double wd : {0.0, 0.05}) {
    for (double b1 : {0.9, 0.3}) {
      auto p = test::normal_floats(n, g);
      std::vector<float> m(n, 0.0f), v(n, 0.0f);
      test::Guarded<float> p_(p, st), m_(m, st), v_(v, st), g_(n, st);
      for (int t = 1; t <= 3; ++t) {
        const auto s = adamw_scalars(1e-3, b1, 0.999, 1e-8, wd, t);
        const auto grad = test::normal_floats(n, g, 1e-2f);
        g_.upload(grad);
        cpu::adamw_step(p.data(), grad.data(), m.data(), v.data(), n, s);
        CHECK_CUDA(adamw_step(p_.get(), g_.get(), m_.get(), v_.get(), n, s, st));
      }
      expect_within_ulp(p_.download(), p, "adamw p");
      expect_within_ulp(m_.download(), m, "adamw m");
      expect_within_ulp(v_.download(), v, "adamw v");
      EXPECT_TRUE(p_.guards_intact() && m_.guards_intact() && v_.guards_intact());
    }
  }
}
#endif

}  // namespace
}  // namespace dp::kernels::cuda
