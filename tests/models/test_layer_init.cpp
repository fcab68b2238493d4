// Parameter initialisation through Graph::build (the real path: f32 arena, per-parameter RNG
// streams): PyTorch's default bounds, torchvision's kaiming_normal_(fan_out), batch-norm's
// constants, and the state-dict names and order.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/graph.h"
#include "tests/models/layer_harness.h"

namespace dp::test {
namespace {

using A = std::map<std::string, ArgValue>;
ArgValue I(int64_t v) { return ArgValue{v}; }

struct Stats {
  double mean = 0, std = 0, max_abs = 0;
};
Stats stats(const Tensor& t) {
  Stats s;
  for (int64_t i = 0; i < t.numel(); ++i) s.mean += get(t, i), s.max_abs = std::max(s.max_abs, std::abs(get(t, i)));
  s.mean /= t.numel();
  for (int64_t i = 0; i < t.numel(); ++i) s.std += std::pow(get(t, i) - s.mean, 2);
  s.std = std::sqrt(s.std / t.numel());
  return s;
}

std::map<std::string, Tensor> build_state(Graph& g, const Shape& input) {
  g.build(input, /*seed=*/7);
  std::map<std::string, Tensor> out;
  for (const auto& nt : g.state()) out[nt.name] = nt.tensor;
  return out;
}

TEST(LayerInit, PytorchDefaultUniformBounds) {
  Graph g;
  g.add(make_layer("conv2d", {{"out_channels", I(64)}, {"kernel", I(3)}, {"groups", I(2)}}, "conv"));
  g.add(make_layer("flatten", {}, "flat"));
  g.add(make_layer("linear", {{"out_features", I(300)}}, "fc"));
  auto st = build_state(g, {32, 5, 5});
  // conv: fan_in = 32/2 * 3 * 3 = 144 -> bound 1/12; linear: fan_in = 64*3*3 = 576 -> bound 1/24.
  for (const auto& [name, bound] : std::vector<std::pair<std::string, double>>{
           {"conv.weight", 1.0 / 12}, {"conv.bias", 1.0 / 12}, {"fc.weight", 1.0 / 24}, {"fc.bias", 1.0 / 24}}) {
    Stats s = stats(st.at(name));
    EXPECT_LE(s.max_abs, bound) << name;
    EXPECT_GT(s.max_abs, 0.9 * bound) << name;  // the whole range is used
    if (st.at(name).numel() > 1000) {
      EXPECT_NEAR(s.std, bound / std::sqrt(3.0), 0.03 * bound / std::sqrt(3.0)) << name;  // U(-b, b): sd b/sqrt(3)
      EXPECT_NEAR(s.mean, 0.0, 0.05 * bound) << name;
    }
  }
  EXPECT_EQ(st.at("conv.weight").shape(), (Shape{64, 16, 3, 3}));
  EXPECT_EQ(st.at("fc.weight").shape(), (Shape{300, 576}));
}

TEST(LayerInit, KaimingNormalFanOut) {
  Graph g;
  g.add(make_layer("conv2d",
                   {{"out_channels", I(128)}, {"kernel", I(3)}, {"init", ArgValue{std::string("kaiming_normal_fan_out")}}},
                   "conv"));
  auto st = build_state(g, {64, 8, 8});
  const double want = std::sqrt(2.0 / (128 * 9));  // torch: fan_out = out_channels * k * k
  Stats s = stats(st.at("conv.weight"));
  EXPECT_NEAR(s.std, want, 0.02 * want);
  EXPECT_NEAR(s.mean, 0.0, 0.02 * want);
  EXPECT_EQ(stats(st.at("conv.bias")).max_abs, 0.0);
}

TEST(LayerInit, BatchNormConstantsAndStateOrder) {
  Graph g;
  g.add(make_layer("batchnorm2d", {}, "bn1"));
  auto st = build_state(g, {6, 4, 4});
  std::vector<std::string> names;
  for (const auto& nt : g.state()) names.push_back(nt.name);
  EXPECT_EQ(names, (std::vector<std::string>{"bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
                                             "bn1.num_batches_tracked"}));
  for (int64_t c = 0; c < 6; ++c) {
    EXPECT_EQ(get(st.at("bn1.weight"), c), 1.0);
    EXPECT_EQ(get(st.at("bn1.bias"), c), 0.0);
    EXPECT_EQ(get(st.at("bn1.running_mean"), c), 0.0);
    EXPECT_EQ(get(st.at("bn1.running_var"), c), 1.0);
  }
  const Tensor& nbt = st.at("bn1.num_batches_tracked");
  EXPECT_EQ(nbt.dtype(), DType::I64);
  EXPECT_EQ(nbt.shape(), Shape{});  // a 0-dim tensor, as in torch's state_dict
  EXPECT_EQ(nbt.data<int64_t>()[0], 0);
}

}  // namespace
}  // namespace dp::test
