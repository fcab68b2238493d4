// The causal attention core's softmax rows (models/layers/attention/causal_core.cpp) on every
// clone this CPU has (kernels/cpu/isa.h): they sum in vector lanes, so a narrower clone sums in
// another order and agrees to f32 rounding, not bit for bit.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/rng.h"
#include "kernels/cpu/isa.h"
#include "models/layers/attention/causal_core.h"

namespace dp::kernels::cpu {
namespace {

std::vector<float> uniform(size_t n, uint64_t seed, float lo, float hi) {
  Rng rng(seed, 1);
  std::vector<float> v(n);
  for (float& x : v) x = lo + static_cast<float>(rng.uniform()) * (hi - lo);
  return v;
}

// The causal core's softmax rows sum in vector lanes: a narrower clone sums in another order, so
// its values agree to f32 rounding, not bit for bit.
TEST(CausalCoreClones, AgreeOnEveryCloneWithinF32Rounding) {
  const int64_t N = 2, H = 2, D = 16, T = 100, C = H * D;
  const CausalBlocks cb(T);
  const std::vector<float> qkv = uniform(N * T * 3 * C, 7, -2, 2), datt = uniform(N * T * C, 8, -1, 1);
  std::vector<float> att0, dqkv0;
  for (CloneIsa isa : {CloneIsa::Avx512, CloneIsa::Avx2, CloneIsa::Baseline}) {
    if (isa > cpu_clone_isa()) continue;
    ScopedCloneIsa use(isa);
    std::vector<float> att(N * T * C), P(N * H * cb.packed), dqkv(N * T * 3 * C), scratch(static_cast<size_t>(omp_get_max_threads()) * 2 * CausalBlocks::kBlockRows * T);
    causal_forward(att.data(), P.data(), qkv.data(), N, H, D, cb, AttnDropout{}, scratch.data());
    causal_backward(dqkv.data(), datt.data(), qkv.data(), P.data(), N, H, D, cb, AttnDropout{}, scratch.data());
    if (att0.empty()) att0 = att, dqkv0 = dqkv;
    double worst = 0;
    for (size_t i = 0; i < att.size(); ++i) worst = std::max(worst, std::abs(double(att[i]) - att0[i]));
    for (size_t i = 0; i < dqkv.size(); ++i) worst = std::max(worst, std::abs(double(dqkv[i]) - dqkv0[i]));
    EXPECT_LT(worst, 1e-5) << clone_isa_name(isa);
  }
}

}  // namespace
}  // namespace dp::kernels::cpu
