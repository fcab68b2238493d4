// Gradient checks: every layer case (tests/models/layer_harness.h) and the loss, f64, analytic
// input and parameter gradients against central finite differences. A deliberately wrong layer
// shows that the checker fails when a gradient is off by 1e-4.
#include <gtest/gtest.h>

#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "tests/models/gradcheck.h"

namespace dp::test {
namespace {

constexpr double kTol = 1e-6;

class LayerGradCheck : public ::testing::TestWithParam<LayerCase> {};

TEST_P(LayerGradCheck, AnalyticMatchesFiniteDifferences) {
  const LayerCase& c = GetParam();
  TestLayer t = make_test_layer(c, DType::F64, /*seed=*/3);
  Rng rng(11, 0);
  GradCheckReport rep = gradcheck(t, case_ctx(c), t.random_inputs(c.batch, rng), /*seed=*/5);
  int64_t expected = 0;
  for (size_t k = 0; k < c.in.size(); ++k)
    if (k > 0 || c.ids == 0) expected += c.batch * shape_numel(c.in[k]);  // ids have no gradient
  for (const auto& p : t.params) expected += p.numel();
  EXPECT_EQ(rep.checked, expected);  // every input and parameter element was compared
  EXPECT_LT(rep.max_error, kTol) << c.name << ": worst " << rep.worst;
  RecordProperty("max_error", fmt::format("{:.3g}", rep.max_error));
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerGradCheck, ::testing::ValuesIn(layer_cases()),
                         [](const auto& info) { return info.param.name; });

// Loss: mean softmax cross entropy, d loss / d logits by finite differences.
void check_loss(double smoothing) {
  const int64_t N = 5, K = 7;
  Rng rng(21, 0);
  Tensor logits = random_normal({N, K}, DType::F64, rng);
  for (int64_t i = 0; i < logits.numel(); ++i) set(logits, i, 3 * get(logits, i));
  Tensor labels = Tensor::zeros({N}, DType::I32);
  for (int64_t n = 0; n < N; ++n) labels.data<int32_t>()[n] = static_cast<int32_t>(rng.below(K));
  models::SoftmaxCrossEntropy ce(smoothing);
  Tensor d = Tensor::zeros({N, K}, DType::F64);
  ce.forward_backward(logits, labels, &d);
  const double h = 1e-6;
  double worst = 0;
  for (int64_t i = 0; i < logits.numel(); ++i) {
    const double keep = get(logits, i);
    set(logits, i, keep + h);
    const double lp = ce.forward_backward(logits, labels, nullptr);
    set(logits, i, keep - h);
    const double lm = ce.forward_backward(logits, labels, nullptr);
    set(logits, i, keep);
    const double num = (lp - lm) / (2 * h);
    worst = std::max(worst, std::abs(num - get(d, i)) / std::max({std::abs(num), std::abs(get(d, i)), 1.0}));
  }
  EXPECT_LT(worst, kTol) << "label_smoothing " << smoothing;
}

TEST(LossGradCheck, SoftmaxCrossEntropy) { check_loss(0.0); }
TEST(LossGradCheck, SoftmaxCrossEntropyLabelSmoothing) { check_loss(0.1); }

// y = w * x with a parameter gradient scaled by (1 + bug): the checker must see bug = 1e-4.
class ScaleLayer : public Layer {
 public:
  ScaleLayer(double bug) : Layer("scale"), bug_(bug) {}
  const char* type() const override { return "scale"; }
  Shape setup(const std::vector<Shape>& in) override { return in[0]; }
  std::vector<ParamDecl> declare_params() const override { 
    ParamDecl w;
    w.name = "w";
    w.shape = {1};
    return {w};
  }

 protected:
  void forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) override {
    for (int64_t i = 0; i < y.numel(); ++i) set(y, i, get(params_[0], 0) * get(x[0], i));
  }
  void backward_cpu(const StepContext&, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                    std::vector<Tensor>& dx) override {
    double s = 0;
    for (int64_t i = 0; i < dy.numel(); ++i) {
      set(dx[0], i, get(params_[0], 0) * get(dy, i));
      s += get(dy, i) * get(x[0], i);
    }
    set(grads_[0], 0, get(grads_[0], 0) + s * (1 + bug_));
  }

 private:
  double bug_;
};

GradCheckReport check_scale_layer(double bug) {
  TestLayer t;
  t.layer = std::make_unique<ScaleLayer>(bug);
  t.in = {{3}};
  t.out = t.layer->setup(t.in);
  t.params = {Tensor::zeros({1}, DType::F64)};
  t.grads = {Tensor::zeros({1}, DType::F64)};
  t.params[0].fill_(1.7);
  t.layer->bind(t.params, t.grads, {});
  Rng rng(2, 0);
  return gradcheck(t, StepContext{}, t.random_inputs(4, rng), 9);
}

TEST(GradCheckSelfTest, PassesCorrectGradient) { EXPECT_LT(check_scale_layer(0).max_error, kTol); }

TEST(GradCheckSelfTest, CatchesGradientOffBy1e4) {
  GradCheckReport rep = check_scale_layer(1e-4);
  EXPECT_GT(rep.max_error, 10 * kTol);
  EXPECT_NE(rep.worst.find("parameter w"), std::string::npos) << rep.worst;
}

}  // namespace
}  // namespace dp::test
