// Our own vectorised CPU loops (kernels/cpu/isa.h): the clone a process runs follows oneDNN's
// effective ISA (so ONEDNN_MAX_CPU_ISA=AVX2 pins the AVX2 clones, as on an AVX2-only CPU), and
// every clone the CPU has gives what its loop promises: element-wise loops and in-order sums the
// same bits on every clone; the causal attention core's softmax (models/layers/attention/), whose
// lane sums differ by vector width, the same values within f32 rounding.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/rng.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn_matmul.h"
#include "kernels/cpu/optim_adamw.h"
#include "kernels/cpu/optim_sgd.h"
#include "models/layers/attention/causal_core.h"

namespace dp::kernels::cpu {
namespace {

std::string upper(const char* s) {
  std::string u = s ? s : "";
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

// The ISA limit the environment sets for oneDNN (and so for us), "" when none.
std::string isa_limit() {
  for (const char* v : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* s = std::getenv(v); s && *s) return upper(s);
  return "";
}

// The clones this CPU can run, widest first.
std::vector<CloneIsa> clones_here() {
  std::vector<CloneIsa> out;
  for (CloneIsa i : {CloneIsa::Avx512, CloneIsa::Avx2, CloneIsa::Baseline})
    if (i <= cpu_clone_isa()) out.push_back(i);
  return out;
}

std::vector<float> uniform(size_t n, uint64_t seed, float lo, float hi) {
  Rng rng(seed, 1);
  std::vector<float> v(n);
  for (float& x : v) x = lo + static_cast<float>(rng.uniform()) * (hi - lo);
  return v;
}

TEST(CloneIsa, FollowsOnednnsEffectiveIsaAndItsLimit) {
  const std::string onednn = onednn_isa_name();
  std::printf("oneDNN's effective ISA: %s (limit: %s); our clones: %s\n", onednn.c_str(),
              isa_limit().empty() ? "none" : isa_limit().c_str(), clone_isa_name(cpu_clone_isa()));
  const CloneIsa want = onednn.rfind("avx512_core", 0) == 0 ? CloneIsa::Avx512
                        : onednn.rfind("avx2", 0) == 0      ? CloneIsa::Avx2
                                                            : CloneIsa::Baseline;
  EXPECT_EQ(cpu_clone_isa(), want) << onednn;
  EXPECT_EQ(onednn_has_avx512_core(), want == CloneIsa::Avx512) << onednn;
  if (isa_limit() == "AVX2") {  // CI's second pass: what an AVX2-only CPU runs
    EXPECT_EQ(onednn, "avx2");
    EXPECT_EQ(cpu_clone_isa(), CloneIsa::Avx2);
  }
}

TEST(CloneIsa, ScopedLimitRunsANarrowerCloneAndNeverAWiderOne) {
  const CloneIsa cpu = cpu_clone_isa();
  {
    ScopedCloneIsa base(CloneIsa::Baseline);
    EXPECT_EQ(clone_isa(), CloneIsa::Baseline);
  }
  EXPECT_EQ(clone_isa(), cpu);
  ScopedCloneIsa wide(CloneIsa::Avx512);
  EXPECT_EQ(clone_isa(), cpu);  // not beyond what the CPU (within the limit) has
}

TEST(CloneIsa, OptimizersGiveTheSameBitsOnEveryClone) {
  constexpr size_t n = 40'000;  // several chunks, a partial one, a tail for every vector width
  const std::vector<float> p0 = uniform(n, 1, -1, 1), g = uniform(n, 2, -1e-2f, 1e-2f), m0 = uniform(n, 3, -1e-3f, 1e-3f),
                           v0 = uniform(n, 4, 0, 1e-5f);
  AdamWScalars a;
  a.decay = 0.9999f, a.bias_correction2_sqrt = 0.0447f, a.neg_step_size = -1e-3f, a.apply_decay = true;
  SgdScalars s;
  s.neg_lr = -0.1f, s.weight_decay = 1e-4f, s.momentum = 0.9f, s.nesterov = true;
  std::vector<std::vector<float>> first;
  for (CloneIsa isa : clones_here()) {
    ScopedCloneIsa use(isa);
    std::vector<float> p = p0, m = m0, v = v0, q = p0, buf = m0;
    adamw_step(p.data(), g.data(), m.data(), v.data(), n, a);
    sgd_step(q.data(), g.data(), buf.data(), n, s);
    const std::vector<std::vector<float>> got{p, m, v, q, buf};
    if (first.empty()) first = got;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(std::memcmp(got[i].data(), first[i].data(), n * sizeof(float)), 0)
          << "tensor " << i << " on the " << clone_isa_name(isa) << " clone";
  }
}

TEST(CloneIsa, BiasGradientGivesTheSameBitsOnEveryClone) {
  const int64_t M = 300, O = 1153;
  const std::vector<float> dy = uniform(M * O, 5, -1e3f, 1e3f), db0 = uniform(O, 6, 0, 1);
  std::vector<float> first;
  for (CloneIsa isa : clones_here()) {
    ScopedCloneIsa use(isa);
    std::vector<float> db = db0;
    onednn::bias_grad_add(db.data(), dy.data(), M, O);
    if (first.empty()) first = db;
    EXPECT_EQ(std::memcmp(db.data(), first.data(), O * sizeof(float)), 0) << clone_isa_name(isa);
  }
}

// The causal core's softmax rows sum in vector lanes: a narrower clone sums in another order.
TEST(CausalCoreClones, AgreeOnEveryCloneWithinF32Rounding) {
  const int64_t N = 2, H = 2, D = 16, T = 100, C = H * D;
  const CausalBlocks cb(T);
  const std::vector<float> qkv = uniform(N * T * 3 * C, 7, -2, 2), datt = uniform(N * T * C, 8, -1, 1);
  std::vector<float> att0, dqkv0;
  for (CloneIsa isa : clones_here()) {
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
