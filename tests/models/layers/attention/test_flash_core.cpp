// The tiled causal attention core (models/layers/attention/flash_core.h) against the reference's
// f64 sums (attention_ref.h) and against the core it replaces (causal_core.h, f32 sums): on every
// ISA clone this CPU runs, with and without attention dropout (the same Philox mask), T = 1,
// T not a multiple of the 64-row tile, several tiles, D not a multiple of 16; bitwise the same
// on 1 and 2 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/rng.h"
#include "kernels/cpu/isa.h"
#include "models/layers/attention/attention_ref.h"
#include "models/layers/attention/causal_core.h"
#include "models/layers/attention/flash_core.h"

namespace dp::kernels::cpu {
namespace {

struct Shape4 {
  int64_t N, H, D, T;
  double dropout;
};

std::vector<float> uniform(size_t n, uint64_t seed, float lo, float hi) {
  Rng rng(seed, 1);
  std::vector<float> v(n);
  for (float& x : v) x = lo + static_cast<float>(rng.uniform()) * (hi - lo);
  return v;
}

std::vector<CloneIsa> clones_here() {
  std::vector<CloneIsa> out;
  for (CloneIsa i : {CloneIsa::Avx512, CloneIsa::Avx2, CloneIsa::Baseline})
    if (i <= cpu_clone_isa()) out.push_back(i);
  return out;
}

double worst_abs(const std::vector<float>& a, const std::vector<double>& ref) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(a[i] - ref[i]));
  return w;
}

// What a core gives: att (N, T, C) and dqkv (N, T, 3C).
struct CoreOut {
  std::vector<float> att, dqkv;
};

// keep: the forward keeps the probabilities for the backward; else the backward recomputes them.
CoreOut run_flash(const Shape4& s, const std::vector<float>& qkv, const std::vector<float>& datt, bool keep) {
  const int64_t C = s.H * s.D;
  const AttnDropout drop{s.dropout, 7, 3};
  CoreOut o{std::vector<float>(s.N * s.T * C), std::vector<float>(s.N * s.T * 3 * C)};
  std::vector<float> lse(s.N * s.H * s.T), P(keep ? s.N * s.H * FlashKept(s.T).packed : 0);
  float* kept = keep ? P.data() : nullptr;
  flash_forward(o.att.data(), lse.data(), kept, qkv.data(), s.N, s.T, s.H, s.D, drop);
  flash_backward(o.dqkv.data(), datt.data(), qkv.data(), o.att.data(), lse.data(), kept, s.N, s.T, s.H, s.D, drop);
  return o;
}

CoreOut run_blocks(const Shape4& s, const std::vector<float>& qkv, const std::vector<float>& datt) {
  const int64_t C = s.H * s.D;
  const AttnDropout drop{s.dropout, 7, 3};
  const CausalBlocks cb(s.T);
  CoreOut o{std::vector<float>(s.N * s.T * C), std::vector<float>(s.N * s.T * 3 * C)};
  std::vector<float> P(s.N * s.H * cb.packed);
  std::vector<float> scratch(static_cast<size_t>(omp_get_max_threads()) * 2 * CausalBlocks::kBlockRows * s.T);
  causal_forward(o.att.data(), P.data(), qkv.data(), s.N, s.H, s.D, cb, drop, scratch.data());
  causal_backward(o.dqkv.data(), datt.data(), qkv.data(), P.data(), s.N, s.H, s.D, cb, drop, scratch.data());
  return o;
}

class FlashCore : public ::testing::TestWithParam<Shape4> {};

// Within f32 rounding of the f64 reference: no worse than 3x the block core's error (the core it
// replaces, whose products are BLAS's f32 sums; the tile kernel sums dK and dV over every query
// row in one f32 chain, which puts the gradients' error at up to 2.4x the block core's, about
// 1e-6 here, kept or recomputed P alike), and below 1e-5 absolute (outputs of order 1).
TEST_P(FlashCore, MatchesTheReferenceOnEveryCloneAsTheBlockCoreDoes) {
  const Shape4 s = GetParam();
  const int64_t C = s.H * s.D;
  const std::vector<float> qkv = uniform(s.N * s.T * 3 * C, 11, -1.5f, 1.5f), datt = uniform(s.N * s.T * C, 12, -1, 1);
  const std::vector<double> qkv64(qkv.begin(), qkv.end()), datt64(datt.begin(), datt.end());
  std::vector<double> att64(s.N * s.T * C), P64(s.N * s.H * s.T * s.T), dqkv64(s.N * s.T * 3 * C);
  const AttnDropout drop{s.dropout, 7, 3};
  attention_forward<double>(att64.data(), P64.data(), qkv64.data(), s.N, s.T, s.H, s.D, drop);
  attention_backward<double>(dqkv64.data(), datt64.data(), qkv64.data(), P64.data(), s.N, s.T, s.H, s.D, drop);
  for (CloneIsa isa : clones_here()) {
    ScopedCloneIsa use(isa);
    const CoreOut b = run_blocks(s, qkv, datt);
    const double ba = worst_abs(b.att, att64), bd = worst_abs(b.dqkv, dqkv64);
    for (bool keep : {true, false}) {
      const CoreOut f = run_flash(s, qkv, datt, keep);
      const double fa = worst_abs(f.att, att64), fd = worst_abs(f.dqkv, dqkv64);
      std::printf("%s N %ld H %ld D %ld T %ld dropout %.1f, P %s: |att - ref| %.2e (blocks %.2e), |dqkv - ref| "
                  "%.2e (blocks %.2e)\n", clone_isa_name(isa), s.N, s.H, s.D, s.T, s.dropout,
                  keep ? "kept" : "recomputed", fa, ba, fd, bd);
      EXPECT_LE(fa, std::max(3 * ba, 1e-6)) << clone_isa_name(isa) << (keep ? " kept" : " recomputed");
      EXPECT_LE(fd, std::max(3 * bd, 1e-6)) << clone_isa_name(isa) << (keep ? " kept" : " recomputed");
      EXPECT_LT(std::max(fa, fd), 1e-5) << clone_isa_name(isa);
    }
  }
}

// One (n, h) per task: the same bits on 1 and 2 threads.
TEST_P(FlashCore, SameBitsOnOneAndTwoThreads) {
  const Shape4 s = GetParam();
  const int64_t C = s.H * s.D;
  const std::vector<float> qkv = uniform(s.N * s.T * 3 * C, 13, -1.5f, 1.5f), datt = uniform(s.N * s.T * C, 14, -1, 1);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  for (bool keep : {true, false}) {
    omp_set_num_threads(1);
    const CoreOut one = run_flash(s, qkv, datt, keep);
    omp_set_num_threads(2);
    const CoreOut two = run_flash(s, qkv, datt, keep);
    EXPECT_EQ(std::memcmp(one.att.data(), two.att.data(), one.att.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(one.dqkv.data(), two.dqkv.data(), one.dqkv.size() * sizeof(float)), 0);
  }
  omp_set_num_threads(saved);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashCore,
                         ::testing::Values(Shape4{1, 1, 64, 1, 0}, Shape4{2, 2, 64, 100, 0}, Shape4{1, 2, 64, 256, 0},
                                           Shape4{2, 3, 16, 70, 0.2}, Shape4{1, 2, 8, 5, 0},
                                           Shape4{1, 1, 24, 130, 0.1}, Shape4{1, 2, 64, 200, 0.2},
                                           Shape4{1, 1, 80, 67, 0}));

}  // namespace
}  // namespace dp::kernels::cpu
