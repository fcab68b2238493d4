// Tests for train.grad_clip (runtime/optim/grad_clip.h) and train.decay_params
// (runtime/optim/param_groups.h, Optimizer::skip_decay): the norm against a plain double sum, the
// clip coefficient, thread-count independence; the decay spans of an arena and an update with and
// without decay per element. On a GPU (suites ending in Gpu) the runtime's device paths equal the
// CPU bit for bit. torch.nn.utils.clip_grad_norm_ and torch.optim.AdamW's parameter groups are the
// references of tests/oracle/test_gpt_train_torch.py.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tests/gpu_test.h"
#include "kernels/cpu/grad_norm.h"
#include "runtime/device_memory.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/grad_clip.h"
#include "runtime/optim/param_groups.h"
#include "runtime/optim/sgd.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "runtime/cuda/stream.h"
#endif

namespace dp::optim {
namespace {

Tensor normal(int64_t n, uint64_t seed, float scale) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Tensor t = Tensor::zeros({n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = d(g);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(GradClip, NormIsTheL2NormAndLargeGradientsAreScaledToMaxNorm) {
  const int64_t n = 100003;  // several chunks and a partial one
  Tensor g = normal(n, 1, 0.1f);
  long double exact = 0;
  for (int64_t i = 0; i < n; ++i) exact += static_cast<long double>(g.data<float>()[i]) * g.data<float>()[i];
  const double norm0 = std::sqrt(static_cast<double>(exact));
  Tensor before = g.clone();
  GradClipper clip(1.0);
  const double norm = clip.clip(g);
  EXPECT_NEAR(norm, norm0, 1e-12 * norm0);
  const float c = static_cast<float>(1.0 / (norm + 1e-6));
  for (int64_t i = 0; i < n; i += 997) EXPECT_EQ(g.data<float>()[i], before.data<float>()[i] * c) << i;
  double after = 0;
  for (int64_t i = 0; i < n; ++i) after += static_cast<double>(g.data<float>()[i]) * g.data<float>()[i];
  EXPECT_NEAR(std::sqrt(after), 1.0, 1e-6);
  // Below the bound: untouched (torch multiplies by the coefficient clamped to 1: the same values).
  Tensor small = normal(n, 2, 1e-4f), copy = small.clone();
  EXPECT_LT(GradClipper(1.0).clip(small), 1.0);
  EXPECT_TRUE(same_bytes(small, copy));
}

TEST(GradClip, TheNormIsTheSameBitsForAnyThreadCount) {
  const Tensor g = normal((int64_t{1} << 20) + 5, 3, 1.0f);
  const int threads = omp_get_max_threads();
  std::vector<double> norms;
  for (int t : {1, 2, 3}) {
    omp_set_num_threads(t);
    Tensor c = g.clone();
    norms.push_back(GradClipper(1e9).clip(c));
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(norms[0], norms[1]);
  EXPECT_EQ(norms[0], norms[2]);
}

// ZeRO's clipping over a rank's pieces (GradClipper::clip_pieces): one piece over the whole arena
// is clip(); pieces give the norm of their squared sums plus what `reduce` adds (the other ranks'),
// clip exactly the elements inside them by it, and leave the rest alone.
const std::vector<ArenaPiece> kPieces = {{10, 40000, 0}, {60000, 39000, 40000}, {99500, 0, 79000}};

TEST(GradClip, PiecesAreClippedByTheNormOfTheirSumsAfterTheReduce) {
  const int64_t n = 100003;
  const Tensor g0 = normal(n, 4, 0.1f);
  Tensor whole = g0.clone(), one = g0.clone();
  const double want_whole = GradClipper(1.0).clip(whole);
  int calls = 0;
  const double got_one = GradClipper(1.0).clip_pieces(one, {{0, n, 0}}, [&](double x) { return ++calls, x; });
  EXPECT_EQ(got_one, want_whole);
  EXPECT_TRUE(same_bytes(one, whole));
  EXPECT_EQ(calls, 1);

  Tensor g = g0.clone(), want = g0.clone();
  double local = 0;
  for (const ArenaPiece& pc : kPieces)
    local += kernels::cpu::sum_of_squares(want.data<float>() + pc.arena_begin, pc.len);
  const double others = 250.0;  // the other ranks' squared sums: the norm is above the bound
  for (const ArenaPiece& pc : kPieces)
    kernels::cpu::clip_by_norm(want.data<float>() + pc.arena_begin, pc.len, local + others, 1.0);
  double seen = -1;
  const double norm = GradClipper(1.0).clip_pieces(g, kPieces, [&](double x) { return seen = x, x + others; });
  EXPECT_EQ(seen, local);
  EXPECT_EQ(norm, std::sqrt(local + others));
  EXPECT_TRUE(same_bytes(g, want));
  EXPECT_EQ(g.data<float>()[5], g0.data<float>()[5]);  // outside the pieces: untouched
  EXPECT_EQ(g.data<float>()[50000], g0.data<float>()[50000]);
  EXPECT_NE(g.data<float>()[50], g0.data<float>()[50]);  // inside: scaled
  try {
    GradClipper(1.0).clip_pieces(g, {{n - 5, 10, 0}}, [](double x) { return x; });
    FAIL() << "a piece past the arena was clipped";
  } catch (const DpError& e) {
    EXPECT_NE(std::string(e.what()).find("gradient clipping: piece (arena 99998, 10 elements) is outside the arena of "
                                         "100003"),
              std::string::npos)
        << e.what();
  }
}

TEST(GradClip, ANonPositiveBoundIsAnError) {
  try {
    GradClipper c(0.0);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "train.grad_clip = 0: the largest gradient norm must be a finite value > 0 (0 turns "
                           "clipping off)");
  }
}

// fc.weight [3, 4], fc.bias [3], bn.weight [3], bn.bias [3], emb [5, 2], head.bias [2].
Arena small_model() {
  Arena a;
  a.add("fc.weight", {3, 4});
  a.add("fc.bias", {3});
  a.add("bn.weight", {3});
  a.add("bn.bias", {3});
  a.add("emb", {5, 2});
  a.add("head.bias", {2});
  return a;
}

TEST(DecayParams, MatricesSkipEveryOneDimensionalSlotAdjacentOnesMerged) {
  const Arena a = small_model();
  EXPECT_TRUE(decay_skip_spans(a, DecayParams::All).empty());
  using Spans = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(decay_skip_spans(a, DecayParams::Matrices), (Spans{{12, 21}, {31, 33}}));
  EXPECT_EQ(decay_summary(a, DecayParams::Matrices, 0.1),
            "weight decay 0.1 on 2 of 6 parameters (22 values; train.decay_params = matrices); none on 4 (11 values): "
            "fc.bias, bn.weight, bn.bias, head.bias");
  EXPECT_EQ(decay_summary(a, DecayParams::All, 0.1),
            "weight decay 0.1 on 6 of 6 parameters (33 values; train.decay_params = all)");
}

// An optimizer with skipped spans equals two optimizers, one with and one without decay, each on
// its own elements (element math is per element: the split is exact).
TEST(DecayParams, SkippedElementsUpdateAsWithoutDecayTheOthersAsWithIt) {
  const Arena a = small_model();
  const int64_t n = a.numel();
  const auto spans = decay_skip_spans(a, DecayParams::Matrices);
  for (bool adam : {true, false}) {
    auto make = [&](double wd) {
      return adam ? make_adamw(n, {.weight_decay = wd}) : make_sgd(n, {.momentum = 0.9, .weight_decay = wd});
    };
    auto mixed = make(0.5), with = make(0.5), without = make(0.0);
    mixed->skip_decay(spans);
    Tensor p = normal(n, 4, 1.0f), pw = p.clone(), pn = p.clone();
    for (int step = 0; step < 3; ++step) {
      const Tensor g = normal(n, 10 + step, 0.1f);
      mixed->step(p, g, 0.1);
      with->step(pw, g, 0.1);
      without->step(pn, g, 0.1);
    }
    for (int64_t i = 0; i < n; ++i) {
      bool skipped = false;
      for (const auto& [b, e] : spans) skipped = skipped || (i >= b && i < e);
      const float want = (skipped ? pn : pw).data<float>()[i];
      EXPECT_EQ(p.data<float>()[i], want) << (adam ? "adamw " : "sgd ") << i;
      EXPECT_NE(pw.data<float>()[i], pn.data<float>()[i]) << "decay must matter at " << i;
    }
  }
}

TEST(DecayParams, SpansMustBeSortedDisjointAndInside) {
  auto opt = make_adamw(10, {});
  EXPECT_THROW(opt->skip_decay({{4, 6}, {5, 8}}), DpError);
  EXPECT_THROW(opt->skip_decay({{4, 11}}), DpError);
  EXPECT_THROW(opt->skip_decay({{4, 4}}), DpError);
  opt->skip_decay({{0, 2}, {2, 10}});
  EXPECT_EQ(opt->decay_skipped().size(), 2u);
}

#ifdef DPTRAIN_HAVE_CUDA
Tensor on_gpu(const Tensor& t) {
  Tensor d = Tensor::zeros(t.shape(), t.dtype(), Device::cuda(0));
  d.copy_from(t);
  return d;
}
Tensor on_cpu(const Tensor& t) {
  Tensor h = Tensor::zeros(t.shape(), t.dtype());
  h.copy_from(t);
  return h;
}

// The runtime's GPU clip (two norm kernels, the clip kernel reading the sum on the device) equals
// the CPU's: the same norm and the same clipped gradients, bit for bit.
DP_GPU_TEST(GradClipGpu, NormAndClippedGradientsEqualTheCpuBitForBit) {
  cuda::CudaStream stream(0);
  for (int64_t n : {int64_t{1}, int64_t{4095}, int64_t{4097}, (int64_t{1} << 22) + 77}) {
    Tensor g = normal(n, 5 + n, 0.05f), dev = on_gpu(g);
    const double cpu = GradClipper(0.5).clip(g);
    const double gpu = GradClipper(0.5).clip(dev, stream.get());
    stream.synchronize();
    EXPECT_EQ(cpu, gpu) << n;
    EXPECT_TRUE(same_bytes(on_cpu(dev), g)) << n;
  }
}

// clip_pieces on the GPU (the piece sums to the host, the reduced sum back to the device for the
// clip kernels) equals the CPU's: the same value handed to reduce, the same norm, the same bytes.
DP_GPU_TEST(GradClipGpu, PiecesEqualTheCpuBitForBit) {
  cuda::CudaStream stream(0);
  const Tensor g0 = normal(100003, 7, 0.1f);
  for (double others : {0.0, 250.0}) {
    Tensor g = g0.clone(), dev = on_gpu(g0);
    double seen_cpu = -1, seen_gpu = -2;
    GradClipper clipper(1.0);
    const double cpu = GradClipper(1.0).clip_pieces(g, kPieces, [&](double x) { return seen_cpu = x, x + others; });
    const double gpu =
        clipper.clip_pieces(dev, kPieces, [&](double x) { return seen_gpu = x, x + others; }, stream.get());
    stream.synchronize();
    EXPECT_EQ(seen_cpu, seen_gpu) << others;
    EXPECT_EQ(cpu, gpu) << others;
    EXPECT_TRUE(same_bytes(on_cpu(dev), g)) << others;
    // The same clipper again, now over the whole arena: its scratch serves both.
    Tensor whole = g0.clone(), whole_dev = on_gpu(g0);
    EXPECT_EQ(GradClipper(1.0).clip(whole), clipper.clip(whole_dev, stream.get()));
    stream.synchronize();
    EXPECT_TRUE(same_bytes(on_cpu(whole_dev), whole));
  }
}

// AdamW and SGD placed on the GPU with decay spans (one fused kernel looking up each element's
// span) equal the CPU's runs of the same spans bit for bit.
DP_GPU_TEST(DecayGpu, FusedUpdateWithDecaySpansEqualsTheCpu) {
  cuda::CudaStream stream(0);
  Arena a;
  for (int k = 0; k < 40; ++k) a.add("w" + std::to_string(k), k % 3 == 0 ? Shape{1000 + k} : Shape{7, 300 + k});
  const int64_t n = a.numel();
  const auto spans = decay_skip_spans(a, DecayParams::Matrices);
  for (bool adam : {true, false}) {
    auto make = [&] { return adam ? make_adamw(n, {.weight_decay = 0.1}) : make_sgd(n, {.momentum = 0.9, .weight_decay = 0.1}); };
    auto cpu = make(), gpu = make();
    cpu->skip_decay(spans);
    gpu->skip_decay(spans);
    gpu->place(Device::cuda(0), stream.get());
    Tensor p = normal(n, 6, 1.0f), pd = on_gpu(p);
    for (int step = 0; step < 3; ++step) {
      const Tensor g = normal(n, 20 + step, 0.1f);
      cpu->step(p, g, 1e-2);
      gpu->step(pd, on_gpu(g), 1e-2);
    }
    stream.synchronize();
    EXPECT_TRUE(same_bytes(on_cpu(pd), p)) << (adam ? "adamw" : "sgd");
  }
}
#endif

}  // namespace
}  // namespace dp::optim
