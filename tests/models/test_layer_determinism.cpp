// Determinism: conv2d and batchnorm2d (and the pooling layers) give bitwise identical outputs,
// input gradients, parameter gradients and buffers on repeated runs, and with 1 or 4 OpenMP
// threads: every reduction has a fixed order. Sizes are above the kernels' OpenMP thresholds.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>

#include "tests/models/layer_harness.h"

namespace dp::test {
namespace {

struct RunResult {
  std::vector<Tensor> tensors;  // y, dx..., grads..., buffers...
};

RunResult run_once(const LayerCase& c, int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  TestLayer t = make_test_layer(c, DType::F32, 8);
  Rng rng(99, 0);
  std::vector<Tensor> x = t.random_inputs(c.batch, rng);
  const StepContext ctx = case_ctx(c);
  RunResult r;
  Tensor y = t.forward(ctx, x);
  Tensor dy = random_normal(y.shape(), DType::F32, rng);
  std::vector<Tensor> dx = t.backward(ctx, x, y, dy);
  r.tensors.push_back(y);
  for (auto& d : dx) r.tensors.push_back(d);
  for (auto& g : t.grads) r.tensors.push_back(g.clone());
  for (auto& b : t.buffers) r.tensors.push_back(b.clone());
  omp_set_num_threads(saved);
  return r;
}

void expect_bitwise_equal(const RunResult& a, const RunResult& b, const std::string& what) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    ASSERT_EQ(a.tensors[i].nbytes(), b.tensors[i].nbytes());
    EXPECT_EQ(std::memcmp(a.tensors[i].raw(), b.tensors[i].raw(), a.tensors[i].nbytes()), 0)
        << what << ": tensor " << i << " differs";
  }
}

class LayerDeterminism : public ::testing::TestWithParam<LayerCase> {};

TEST_P(LayerDeterminism, BitwiseRepeatableAcrossRunsAndThreadCounts) {
  const LayerCase& c = GetParam();
  RunResult first = run_once(c, 4);
  expect_bitwise_equal(first, run_once(c, 4), c.name + " (run 2, 4 threads)");
  expect_bitwise_equal(first, run_once(c, 1), c.name + " (1 thread)");
}

std::vector<LayerCase> big_cases() {
  using A = std::map<std::string, ArgValue>;
  auto I = [](int64_t v) { return ArgValue{v}; };
  return {
      {"conv_k3_g2", "conv2d", A{{"out_channels", I(16)}, {"kernel", I(3)}, {"padding", I(1)}, {"groups", I(2)}},
       {{8, 16, 16}}, 16},
      {"conv_s2", "conv2d", A{{"out_channels", I(12)}, {"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}},
       {{6, 20, 20}}, 12},
      {"bn_train", "batchnorm2d", A{}, {{8, 16, 16}}, 16, true},
      {"bn_eval", "batchnorm2d", A{}, {{8, 16, 16}}, 16, false},
      {"maxpool_overlap", "maxpool2d", A{{"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}}, {{8, 16, 16}}, 16},
      {"avgpool_overlap", "avgpool2d", A{{"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}}, {{8, 16, 16}}, 16},
      {"linear", "linear", A{{"out_features", I(64)}}, {{300}}, 64},
  };
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerDeterminism, ::testing::ValuesIn(big_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dp::test
