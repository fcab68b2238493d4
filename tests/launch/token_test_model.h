// defines: TestBigram, a test-only language model layer ("test_bigram", registered with
// register_test_bigram into the test binary's registry): logits[n, t, :] = weight[x[n, t], :] + bias,
// the bigram model of Karpathy's makemore. It is the smallest model that takes i32 token ids [T]
// and gives logits [T, V], so the token data path, the loss over positions, evaluation, clipping
// and the decay rule can be tested through a real training run (the GPT layers live elsewhere).
// Its two parameters are a matrix (decayed by the "matrices" rule) and a vector (not decayed).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/registry.h"
#include "runtime/layer.h"

namespace dp::testing_tokens {

class TestBigram : public Layer {
 public:
  TestBigram(std::string name, int64_t vocab) : Layer(std::move(name)), v_(vocab) {}
  const char* type() const override { return "test_bigram"; }
  // It takes token ids (Layer::takes_integer_input: the graph refuses ids for layers that do not
  // say so).
  bool takes_integer_input() const override { return true; }
  Shape setup(const std::vector<Shape>& in) override {
    DP_CHECK(in.size() == 1 && in[0].size() == 1, "test_bigram takes token ids [T]");
    t_ = in[0][0];
    return {t_, v_};
  }
  std::vector<ParamDecl> declare_params() const override {
    ParamDecl w{"weight", {v_, v_}, true, DType::F32, [](Tensor& t, Rng& rng) {
                  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.02f * rng.normal();
                }};
    ParamDecl b{"bias", {v_}, true, DType::F32, nullptr};
    return {w, b};
  }

 protected:
  void forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) override {
    const int64_t rows = x[0].numel();
    const int32_t* ids = x[0].data<int32_t>();
    const float* w = params_[0].data<float>();
    const float* b = params_[1].data<float>();
    float* out = y.data<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < v_; ++k) out[r * v_ + k] = w[ids[r] * v_ + k] + b[k];
  }
  void backward_cpu(const StepContext&, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                    std::vector<Tensor>&) override {
    const int64_t rows = x[0].numel();
    const int32_t* ids = x[0].data<int32_t>();
    const float* g = dy.data<float>();
    float* dw = grads_[0].data<float>();
    float* db = grads_[1].data<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < v_; ++k) dw[ids[r] * v_ + k] += g[r * v_ + k], db[k] += g[r * v_ + k];
  }

 private:
  int64_t v_, t_ = 0;
};

// Adds "test_bigram" (key: vocab) to the registry once per process.
inline void register_test_bigram() {
  static const bool done = [] {
    models::add_layer_type_for_tests("test_bigram", {ArgSpec{"vocab", ArgKind::Int, std::nullopt, 1, 65536}},
                                     [](const std::string& name, const LayerArgs& a) {
                                       return std::make_unique<TestBigram>(name, a.i("vocab"));
                                     });
    return true;
  }();
  (void)done;
}

}  // namespace dp::testing_tokens
