// Graph: parameters are views into one arena (same layout for gradients), state names follow
// registration order, backward sums gradients over consumers (residual joins) and fires the
// "gradients ready" hook in reverse layer order, once per layer with parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "models/build.h"
#include "runtime/graph.h"
#include "tests/models/layer_harness.h"

namespace dp {
namespace {

// fc1 -> fc2 -> add(fc2, fc1) -> fc3: fc1's output has two consumers.
std::unique_ptr<Graph> residual_net() {
  ModelConfig mc;
  mc.layers = {test::layer_spec("linear", "fc1", {{"out_features", int64_t{6}}}),
               test::layer_spec("linear", "fc2", {{"out_features", int64_t{6}}}),
               test::layer_spec("add", "join", {}, {"fc2", "fc1"}),
               test::layer_spec("linear", "fc3", {{"out_features", int64_t{3}}})};
  return models::build_model(mc, {4}, /*seed=*/11);
}

Tensor random(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::zeros(s);
  Rng rng(seed, 0);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
  return t;
}

TEST(Graph, ParametersAreViewsIntoOneArena) {
  auto g = residual_net();
  EXPECT_EQ(g->num_parameters(), (4 * 6 + 6) + (6 * 6 + 6) + (6 * 3 + 3));
  const char* base = static_cast<const char*>(g->params().flat().raw());
  const char* gbase = static_cast<const char*>(g->grads().flat().raw());
  int64_t expect_offset = 0;
  for (int i = 0; i < g->params().size(); ++i) {
    const auto& slot = g->params().slot(i);
    EXPECT_EQ(slot.offset, expect_offset) << slot.name;  // packed back to back, in order
    EXPECT_EQ(static_cast<const char*>(g->params().tensor(i).raw()), base + 4 * slot.offset);
    EXPECT_EQ(static_cast<const char*>(g->grads().tensor(i).raw()), gbase + 4 * slot.offset);
    expect_offset += slot.numel;
  }
  std::vector<std::string> names;
  for (const auto& nt : g->state()) names.push_back(nt.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight",
                                             "fc3.bias"}));
  // The layer's own views are the arena's.
  EXPECT_EQ(g->nodes()[0].layer->params()[0].raw(), g->params().tensor(0).raw());
}

TEST(Graph, BackwardMatchesFiniteDifferencesThroughAResidualJoin) {
  auto g = residual_net();
  const StepContext ctx{true, 0, 0};
  const Tensor x = random({5, 4}, 1), r = random({5, 3}, 2);
  auto loss = [&] {
    const Tensor& y = g->forward(ctx, x);
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data<float>()[i]) * r.data<float>()[i];
    return s;
  };
  g->zero_grad();
  loss();
  std::vector<int> ready;
  g->backward(ctx, r, [&](int node) { ready.push_back(node); });
  EXPECT_EQ(ready, (std::vector<int>{3, 1, 0})) << "reverse order, layers with parameters only";
  const Tensor analytic = g->grads().flat().clone();
  float* p = g->params().flat().data<float>();
  const double h = 1e-2;  // f32 parameters: a large step; the net is linear in each parameter
  double worst = 0;
  for (int64_t i = 0; i < analytic.numel(); ++i) {
    const float keep = p[i];
    p[i] = static_cast<float>(keep + h);
    const double lp = loss();
    p[i] = static_cast<float>(keep - h);
    const double lm = loss();
    p[i] = keep;
    const double num = (lp - lm) / (2 * h), ana = analytic.data<float>()[i];
    worst = std::max(worst, std::abs(num - ana) / std::max({std::abs(num), std::abs(ana), 1.0}));
  }
  EXPECT_LT(worst, 1e-4);
}

TEST(Graph, GradientsAccumulateUntilZeroed) {
  auto g = residual_net();
  const StepContext ctx{true, 0, 0};
  const Tensor x = random({3, 4}, 3), r = random({3, 3}, 4);
  g->zero_grad();
  g->forward(ctx, x);
  g->backward(ctx, r);
  const Tensor once = g->grads().flat().clone();
  g->forward(ctx, x);
  g->backward(ctx, r);
  for (int64_t i = 0; i < once.numel(); ++i)
    ASSERT_FLOAT_EQ(g->grads().flat().data<float>()[i], 2 * once.data<float>()[i]) << i;
  g->zero_grad();
  for (int64_t i = 0; i < once.numel(); ++i) ASSERT_EQ(g->grads().flat().data<float>()[i], 0.0f);
}

TEST(Graph, BatchSizeMayChangeBetweenCalls) {
  auto g = residual_net();
  const StepContext ctx{false, 0, 0};
  const Tensor x = random({4, 4}, 5);
  const Tensor full = g->forward(ctx, x).clone();
  const Tensor& half = g->forward(ctx, x.narrow0(0, 2));
  ASSERT_EQ(half.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < half.numel(); ++i) EXPECT_EQ(half.data<float>()[i], full.data<float>()[i]);
}

TEST(Graph, WrongInputShapeIsAClearError) {
  auto g = residual_net();
  try {
    g->forward(StepContext{}, Tensor::zeros({2, 5}));
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "model input has shape [2, 5], expected [2, 4] (batch, then the model's input shape)");
  }
}

TEST(Graph, SameSeedSameInitDifferentSeedDifferent) {
  auto a = residual_net(), b = residual_net();
  ModelConfig mc;
  mc.preset = PresetKind::Mlp;
  mc.hidden = {8};
  auto c1 = models::build_model(mc, {1, 4, 4}, 1), c2 = models::build_model(mc, {1, 4, 4}, 2);
  EXPECT_EQ(0, std::memcmp(a->params().flat().raw(), b->params().flat().raw(), a->params().flat().nbytes()));
  EXPECT_NE(0, std::memcmp(c1->params().flat().raw(), c2->params().flat().raw(), c1->params().flat().nbytes()));
}

}  // namespace
}  // namespace dp
