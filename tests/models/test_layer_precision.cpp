// f32 and f64 agree: every layer case run in both dtypes on the same inputs, parameters and
// buffers; the f32 output, input gradients and parameter gradients are compared with the f64
// ones (normalised error max|a - b| / max|b|).
#include <gtest/gtest.h>

#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "tests/models/layer_harness.h"

namespace dp::test {
namespace {

constexpr double kTol = 1e-5;

class LayerPrecision : public ::testing::TestWithParam<LayerCase> {};

TEST_P(LayerPrecision, F32MatchesF64) {
  const LayerCase& c = GetParam();
  TestLayer t64 = make_test_layer(c, DType::F64, 3);
  TestLayer t32 = make_test_layer(c, DType::F32, 3);
  t32.copy_state_from(t64);
  Rng rng(13, 0);
  std::vector<Tensor> x64 = t64.random_inputs(c.batch, rng), x32;
  for (const auto& x : x64) x32.push_back(cast(x, DType::F32));
  const StepContext ctx = case_ctx(c);
  Tensor y64 = t64.forward(ctx, x64), y32 = t32.forward(ctx, x32);
  EXPECT_LT(normalised_error(y32, y64), kTol) << c.name << " output";
  Tensor dy64 = random_normal(y64.shape(), DType::F64, rng);
  std::vector<Tensor> dx64 = t64.backward(ctx, x64, y64, dy64);
  std::vector<Tensor> dx32 = t32.backward(ctx, x32, y32, cast(dy64, DType::F32));
  for (size_t k = 0; k < dx64.size(); ++k) {
    if (!dx64[k].defined()) continue;  // ids: no gradient
    EXPECT_LT(normalised_error(dx32[k], dx64[k]), kTol) << c.name << " dx" << k;
  }
  for (size_t j = 0; j < t64.grads.size(); ++j) {
    EXPECT_LT(normalised_error(t32.grads[j], t64.grads[j]), kTol) << c.name << " parameter gradient " << j;
  }
  for (size_t j = 0; j < t64.buffers.size(); ++j) {
    if (is_floating(t64.buffers[j].dtype())) {
      EXPECT_LT(normalised_error(t32.buffers[j], t64.buffers[j]), kTol) << c.name << " buffer " << j;
    }
  }
  // The check must be able to fail: the two outputs are not trivially equal objects.
  EXPECT_NE(y32.dtype(), y64.dtype());
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerPrecision, ::testing::ValuesIn(layer_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(LayerLossPrecision, SoftmaxCrossEntropyF32MatchesF64) {
  const int64_t N = 6, K = 10;
  Rng rng(4, 0);
  Tensor z64 = random_normal({N, K}, DType::F64, rng), z32 = cast(z64, DType::F32);
  Tensor labels = Tensor::zeros({N}, DType::I32);
  for (int64_t n = 0; n < N; ++n) labels.data<int32_t>()[n] = static_cast<int32_t>(rng.below(K));
  Tensor d64 = Tensor::zeros({N, K}, DType::F64), d32 = Tensor::zeros({N, K}, DType::F32);
  models::SoftmaxCrossEntropy ce(0.1);
  const double l64 = ce.forward_backward(z64, labels, &d64), l32 = ce.forward_backward(z32, labels, &d32);
  EXPECT_LT(std::abs(l32 - l64) / std::abs(l64), kTol);
  EXPECT_LT(normalised_error(d32, d64), kTol);
}

}  // namespace
}  // namespace dp::test
