// Layer behaviours beyond gradients: the backward conventions (dx overwritten, parameter
// gradients accumulated, undefined dx skipped), batch-norm running statistics, dropout masks,
// max-pool tie breaking and the loss's values and errors, each checked against numbers.
#include <gtest/gtest.h>

#include <cmath>

#include "models/layers/dropout/dropout.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "tests/models/layer_harness.h"

namespace dp::test {
namespace {

using A = std::map<std::string, ArgValue>;

const LayerCase& find_case(const std::string& name) {
  static const std::vector<LayerCase> cases = layer_cases();
  for (const auto& c : cases)
    if (c.name == name) return c;
  throw std::runtime_error("no case " + name);
}

class LayerConventions : public ::testing::TestWithParam<LayerCase> {};

// dx is overwritten whatever it held; parameter gradients add up over two backward calls; an
// undefined dx is skipped without changing the parameter gradients.
TEST_P(LayerConventions, OverwriteDxAccumulateGradsSkipUndefined) {
  const LayerCase& c = GetParam();
  TestLayer t = make_test_layer(c, DType::F64, 3);
  Rng rng(5, 0);
  std::vector<Tensor> x = t.random_inputs(c.batch, rng);
  const StepContext ctx = case_ctx(c);
  Tensor y = t.forward(ctx, x);
  Tensor dy = random_normal(y.shape(), DType::F64, rng);
  std::vector<Tensor> clean = t.backward(ctx, x, y, dy);
  std::vector<Tensor> once;
  for (auto& g : t.grads) once.push_back(g.clone());

  std::vector<Tensor> dirty;
  for (const auto& xi : x) {
    dirty.push_back(is_floating(xi.dtype()) ? Tensor::zeros(xi.shape(), DType::F64) : Tensor());  // ids: none
    if (dirty.back().defined()) dirty.back().fill_(7.0);
  }
  t.layer->backward(ctx, x, y, dy, dirty);  // grads now hold 2x
  for (size_t k = 0; k < x.size(); ++k) {
    if (dirty[k].defined()) {
      EXPECT_EQ(normalised_error(dirty[k], clean[k]), 0.0) << c.name << " dx" << k;
    }
  }
  for (size_t j = 0; j < once.size(); ++j) {
    Tensor twice = once[j].clone();
    for (int64_t i = 0; i < twice.numel(); ++i) set(twice, i, 2 * get(twice, i));
    EXPECT_LT(normalised_error(t.grads[j], twice), 1e-15) << c.name << " gradient " << j << " not accumulated";
  }

  for (auto& g : t.grads) g.zero_();
  std::vector<Tensor> none(x.size());
  t.layer->backward(ctx, x, y, dy, none);
  for (size_t j = 0; j < once.size(); ++j) EXPECT_EQ(normalised_error(t.grads[j], once[j]), 0.0) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerConventions, ::testing::ValuesIn(layer_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(BatchNormLayer, RunningStatisticsFollowTorch) {
  LayerCase c = find_case("bn_train");  // momentum 0.2, [3, 4, 5], batch 4
  TestLayer t = make_test_layer(c, DType::F64, 3);
  t.buffers[0].fill_(0.5);  // running_mean
  t.buffers[1].fill_(2.0);  // running_var
  Rng rng(6, 0);
  std::vector<Tensor> x = t.random_inputs(c.batch, rng);
  t.forward(case_ctx(c), x);
  const int64_t C = 3, HW = 20, N = 4, M = N * HW;
  for (int64_t ch = 0; ch < C; ++ch) {
    double s = 0, ss = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) s += get(x[0], (n * C + ch) * HW + i);
    const double mean = s / M;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) ss += std::pow(get(x[0], (n * C + ch) * HW + i) - mean, 2);
    EXPECT_NEAR(get(t.buffers[0], ch), 0.8 * 0.5 + 0.2 * mean, 1e-14);
    EXPECT_NEAR(get(t.buffers[1], ch), 0.8 * 2.0 + 0.2 * ss / (M - 1), 1e-14);  // unbiased
  }
  EXPECT_EQ(t.buffers[2].data<int64_t>()[0], 1);
  t.forward(case_ctx(c), x);
  EXPECT_EQ(t.buffers[2].data<int64_t>()[0], 2);
  // Eval leaves the buffers alone and uses them.
  Tensor rm = t.buffers[0].clone();
  Tensor y = t.forward(StepContext{false, 0, 0}, x);
  EXPECT_EQ(normalised_error(t.buffers[0], rm), 0.0);
  EXPECT_EQ(t.buffers[2].data<int64_t>()[0], 2);
  const double want = (get(x[0], 0) - get(t.buffers[0], 0)) / std::sqrt(get(t.buffers[1], 0) + 1e-5) *
                          get(t.params[0], 0) + get(t.params[1], 0);
  EXPECT_NEAR(get(y, 0), want, 1e-12);
}

TEST(BatchNormLayer, TrainingWithOneValuePerChannelIsAnError) {
  TestLayer t = make_test_layer({"bn", "batchnorm2d", A{}, {{2, 1, 1}}, 1}, DType::F32, 1);
  Rng rng(1, 0);
  EXPECT_THROW(t.forward(StepContext{true, 0, 0}, t.random_inputs(1, rng)), UserError);
}

Tensor dropout_out(const std::string& name, const StepContext& ctx, const Tensor& x, double p = 0.3) {
  TestLayer t = make_test_layer({name, "dropout", A{{"p", ArgValue{p}}}, {Shape(x.shape().begin() + 1, x.shape().end())}},
                                DType::F64, 1);
  return t.forward(ctx, {x});
}

TEST(DropoutLayer, MaskIsAFunctionOfSeedStepAndName) {
  Tensor x = Tensor::zeros({8, 1000}, DType::F64);
  x.fill_(1.0);
  const StepContext ctx{true, 42, 3};
  Tensor a = dropout_out("drop1", ctx, x);
  EXPECT_EQ(normalised_error(dropout_out("drop1", ctx, x), a), 0.0);          // reproducible
  EXPECT_GT(normalised_error(dropout_out("drop1", {true, 42, 4}, x), a), 0.0);  // next step differs
  EXPECT_GT(normalised_error(dropout_out("drop2", ctx, x), a), 0.0);          // other layer differs
  EXPECT_GT(normalised_error(dropout_out("drop1", {true, 43, 3}, x), a), 0.0);  // other seed differs
  int64_t kept = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double v = get(a, i);
    EXPECT_TRUE(v == 0.0 || std::abs(v - 1.0 / 0.7) < 1e-15) << v;
    kept += v != 0.0;
  }
  // 8000 Bernoulli(0.7) draws: sd = sqrt(8000 * 0.21) = 41; allow 5 sd.
  EXPECT_NEAR(static_cast<double>(kept), 5600.0, 205.0);
  // The first element follows Rng(seed, mask_stream) exactly.
  Rng r(42, models::Dropout::mask_stream("drop1", 3));
  EXPECT_EQ(get(a, 0) != 0.0, r.uniform() >= 0.3);
}

TEST(DropoutLayer, EvalAndZeroPAreIdentity) {
  Rng rng(3, 0);
  Tensor x = random_normal({4, 50}, DType::F64, rng);
  EXPECT_EQ(normalised_error(dropout_out("d", {false, 1, 1}, x), x), 0.0);
  EXPECT_EQ(normalised_error(dropout_out("d", {true, 1, 1}, x, 0.0), x), 0.0);
}

TEST(MaxPoolLayer, TiesGoToTheFirstMaximumAsInTorch) {
  TestLayer t = make_test_layer({"p", "maxpool2d", A{{"kernel", ArgValue{int64_t{2}}}}, {{1, 2, 4}}, 1}, DType::F64, 1);
  Tensor x = Tensor::zeros({1, 1, 2, 4}, DType::F64);
  x.fill_(3.0);
  Tensor y = t.forward(StepContext{}, {x});
  Tensor dy = Tensor::zeros(y.shape(), DType::F64);
  dy.fill_(1.0);
  std::vector<Tensor> dx = t.backward(StepContext{}, {x}, y, dy);
  const std::vector<double> want{1, 0, 1, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(get(dx[0], i), want[i]) << i;
}

TEST(ReluLayer, Values) {
  TestLayer t = make_test_layer({"relu", "relu", A{}, {{4}}, 1}, DType::F32, 1);
  Tensor x = Tensor::zeros({1, 4}, DType::F32);
  const float xs[] = {-2.0f, 0.0f, 0.5f, 3.0f};
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = xs[i];
  Tensor y = t.forward(StepContext{}, {x});
  const float want[] = {0.0f, 0.0f, 0.5f, 3.0f};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.data<float>()[i], want[i]);
}

TEST(LayerLossSoftmaxCrossEntropy, KnownValues) {
  const int64_t K = 5;
  Tensor z = Tensor::zeros({2, K}, DType::F64);
  Tensor labels = Tensor::zeros({2}, DType::I32);
  labels.data<int32_t>()[0] = 1, labels.data<int32_t>()[1] = 4;
  // Uniform logits: loss = log K with or without smoothing.
  EXPECT_NEAR(models::SoftmaxCrossEntropy().forward_backward(z, labels, nullptr), std::log(5.0), 1e-15);
  EXPECT_NEAR(models::SoftmaxCrossEntropy(0.3).forward_backward(z, labels, nullptr), std::log(5.0), 1e-15);
  // One row [0, 1, 2, 3, 4], label 1, eps 0.1: (1 - eps) nll_1 + eps mean_k nll_k.
  Tensor z1 = Tensor::zeros({1, K}, DType::F64);
  for (int k = 0; k < K; ++k) set(z1, k, k);
  Tensor l1 = Tensor::zeros({1}, DType::I32);
  l1.data<int32_t>()[0] = 1;
  double lse = 0;
  for (int k = 0; k < K; ++k) lse += std::exp(k);
  lse = std::log(lse);
  const double want = 0.9 * (lse - 1) + 0.1 * (lse - 2.0);  // mean_k z_k = 2
  Tensor d = Tensor::zeros({1, K}, DType::F64);
  EXPECT_NEAR(models::SoftmaxCrossEntropy(0.1).forward_backward(z1, l1, &d), want, 1e-14);
  EXPECT_NEAR(get(d, 1), std::exp(1 - lse) - 0.9 - 0.02, 1e-15);
  EXPECT_NEAR(get(d, 3), std::exp(3 - lse) - 0.02, 1e-15);
}

TEST(LayerLossSoftmaxCrossEntropy, HugeLogitsStayFinite) {
  Tensor z = Tensor::zeros({1, 3}, DType::F32);
  z.data<float>()[0] = 1000.0f, z.data<float>()[1] = -1000.0f, z.data<float>()[2] = 999.0f;
  Tensor labels = Tensor::zeros({1}, DType::I32);
  labels.data<int32_t>()[0] = 2;
  Tensor d = Tensor::zeros({1, 3}, DType::F32);
  const double loss = models::SoftmaxCrossEntropy().forward_backward(z, labels, &d);
  EXPECT_NEAR(loss, std::log1p(std::exp(1.0)), 1e-6);  // -log(e^999 / (e^1000 + e^999))
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(std::isfinite(d.data<float>()[k]));
}

TEST(LayerLossSoftmaxCrossEntropy, LabelOutOfRangeNamesLabelAndIndex) {
  Tensor z = Tensor::zeros({3, 5}, DType::F32);
  Tensor labels = Tensor::zeros({3}, DType::I32);
  labels.data<int32_t>()[1] = 7;
  try {
    models::SoftmaxCrossEntropy().forward_backward(z, labels, nullptr);
    FAIL() << "no error";
  } catch (const DpError& e) {
    EXPECT_STREQ(e.what(), "softmax cross entropy: label 7 at batch index 1 is outside [0, 5) (the model has 5 classes)");
  }
}

}  // namespace
}  // namespace dp::test
