// defines: test helpers for layers, shared by the GoogleTest layer tests and the PyTorch oracle
// dump (tests/oracle/layers_dump.cpp): LayerCase (one layer configuration) and layer_cases()
// (the list every check runs over), TestLayer (a layer built through the registry and bound to
// its own tensors of a chosen dtype), random and cast helpers. Header-only, no GoogleTest.
#pragma once
#include <cmath>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "models/registry.h"
#include "base/rng.h"
#include "base/shape.h"  // with_batch
#include "runtime/tensor.h"

namespace dp::test {

struct LayerCase {
  std::string name;                        // "conv_s2_g2": also the tensor-name prefix in the oracle file
  std::string type;                        // registered layer type
  std::map<std::string, ArgValue> args;
  std::vector<Shape> in;                   // per-sample input shapes
  int64_t batch = 2;
  bool training = true;
  int64_t ids = 0;    // > 0: the (first) input is integer ids in [0, ids) (an embedding), i32, no gradient
  bool cuda = true;   // false: the layer has no CUDA path yet (test_cuda_layers.cpp leaves it out)
};

// GoogleTest prints parameterised cases with this (instead of their bytes).
inline void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name << " (" << c.type << ")"; }

// Every configuration the gradient checks, the f32/f64 comparison and the PyTorch oracle cover.
inline std::vector<LayerCase> layer_cases() {
  using A = std::map<std::string, ArgValue>;
  auto I = [](int64_t v) { return ArgValue{v}; };
  return {
      {"linear", "linear", A{{"out_features", I(5)}}, {{7}}, 3},
      {"linear_nobias", "linear", A{{"out_features", I(4)}, {"bias", ArgValue{false}}}, {{6}}, 2},
      {"conv_k3_p1", "conv2d", A{{"out_channels", I(4)}, {"kernel", I(3)}, {"padding", I(1)}}, {{3, 6, 5}}, 2},
      {"conv_s2_g2", "conv2d",
       A{{"out_channels", I(4)}, {"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}, {"groups", I(2)}},
       {{4, 7, 7}}, 2},
      {"conv_1x1", "conv2d", A{{"out_channels", I(5)}, {"kernel", I(1)}}, {{3, 4, 5}}, 2},
      {"conv_1x1_s2_nobias", "conv2d",
       A{{"out_channels", I(4)}, {"kernel", I(1)}, {"stride", I(2)}, {"bias", ArgValue{false}}}, {{4, 5, 5}}, 2},
      {"conv_depthwise_p2", "conv2d",
       A{{"out_channels", I(4)}, {"kernel", I(3)}, {"padding", I(2)}, {"groups", I(4)}}, {{4, 4, 4}}, 2},
      {"bn_train", "batchnorm2d", A{{"momentum", ArgValue{0.2}}}, {{3, 4, 5}}, 4, true},
      {"bn_eval", "batchnorm2d", A{}, {{3, 4, 5}}, 3, false},
      {"relu", "relu", A{}, {{3, 4, 4}}, 2},
      {"maxpool_k2", "maxpool2d", A{{"kernel", I(2)}}, {{2, 6, 6}}, 2},
      {"maxpool_k3_s2_p1", "maxpool2d", A{{"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}}, {{2, 7, 7}}, 2},
      {"maxpool_k3_s1", "maxpool2d", A{{"kernel", I(3)}, {"stride", I(1)}}, {{2, 5, 6}}, 2},
      {"avgpool_k2", "avgpool2d", A{{"kernel", I(2)}}, {{2, 6, 6}}, 2},
      {"avgpool_k3_s2_p1", "avgpool2d", A{{"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}}, {{2, 7, 7}}, 2},
      {"global_avgpool", "global_avgpool", A{}, {{3, 4, 5}}, 2},
      {"flatten", "flatten", A{}, {{2, 3, 4}}, 2},
      {"dropout_train", "dropout", A{{"p", ArgValue{0.3}}}, {{4, 5, 6}}, 4, true},
      {"dropout_eval", "dropout", A{{"p", ArgValue{0.3}}}, {{4, 5, 6}}, 2, false},
      {"add", "add", A{}, {{3, 4, 4}, {3, 4, 4}}, 2},
      // The GPT layers and linear over a sequence [T, C].
      {"linear_seq", "linear", A{{"out_features", I(5)}}, {{4, 7}}, 3},
      {"embedding", "embedding", A{{"num_embeddings", I(11)}, {"embedding_dim", I(6)}}, {{5}}, 3, true, 11},
      {"position_embedding", "position_embedding", A{{"num_positions", I(7)}}, {{5, 6}}, 2, true, 0, true},
      {"layernorm", "layernorm", A{}, {{5, 8}}, 2, true, 0, true},
      {"layernorm_nobias", "layernorm", A{{"bias", ArgValue{false}}, {"eps", ArgValue{1e-3}}}, {{7}}, 3, true, 0, true},
      {"gelu_tanh", "gelu", A{}, {{4, 6}}, 2, true, 0, true},
      {"gelu_erf", "gelu", A{{"approximate", ArgValue{std::string("none")}}}, {{3, 5}}, 2, true, 0, true},
      {"attention", "causal_self_attention", A{{"n_head", I(2)}}, {{5, 8}}, 2},
      {"attention_nobias_h4", "causal_self_attention", A{{"n_head", I(4)}, {"bias", ArgValue{false}}}, {{9, 8}}, 2},
      // More rows than one causal block of the oneDNN path (64): a full block and a partial one.
      {"attention_blocks", "causal_self_attention", A{{"n_head", I(2)}}, {{70, 4}}, 1},
      {"attention_dropout", "causal_self_attention",
       A{{"n_head", I(2)}, {"dropout", ArgValue{0.3}}, {"resid_dropout", ArgValue{0.2}}}, {{6, 4}}, 2},
      // Head dim 8: on the GPU in bf16/f16 cuDNN's fused attention runs ("auto"), and the own
      // kernel when told to ("own"); f32 runs the own kernel either way.
      {"attention_d8", "causal_self_attention", A{{"n_head", I(2)}}, {{6, 16}}, 2},
      {"attention_d8_own", "causal_self_attention", A{{"n_head", I(2)}, {"sdpa", ArgValue{std::string("own")}}},
       {{6, 16}}, 2},
  };
}

inline StepContext case_ctx(const LayerCase& c) { return StepContext{c.training, /*seed=*/1234, /*step=*/5}; }

// Element i of a CPU f32/f64 tensor as double (and back).
inline double get(const Tensor& t, int64_t i) {
  return t.dtype() == DType::F64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]);
}
inline void set(const Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::F64) t.data<double>()[i] = v;
  else t.data<float>()[i] = static_cast<float>(v);
}

inline Tensor random_uniform(const Shape& shape, DType dtype, Rng& rng, double lo = -1, double hi = 1) {
  Tensor t = Tensor::zeros(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, rng.uniform(lo, hi));
  return t;
}

inline Tensor random_normal(const Shape& shape, DType dtype, Rng& rng) {
  Tensor t = Tensor::zeros(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, rng.normal());
  return t;
}

// A copy of a float tensor in another float dtype (integer tensors are cloned as they are).
inline Tensor cast(const Tensor& t, DType dtype) {
  if (!is_floating(t.dtype()) || t.dtype() == dtype) return t.clone();
  Tensor out = Tensor::zeros(t.shape(), dtype);
  for (int64_t i = 0; i < t.numel(); ++i) set(out, i, get(t, i));
  return out;
}

// A layer set up for per-sample input shapes and bound to tensors it does not share with
// anything else: parameters U(-1, 1), float buffers U(0.5, 1.5) (valid running variances),
// integer buffers 0, gradients 0.
struct TestLayer {
  std::unique_ptr<Layer> layer;
  std::vector<Shape> in;
  Shape out;
  DType dtype = DType::F64;
  std::vector<Tensor> params, grads, buffers;

  int64_t ids = 0;  // > 0: the first input is i32 ids in [0, ids)

  std::vector<Tensor> random_inputs(int64_t batch, Rng& rng) const {
    std::vector<Tensor> x;
    for (const auto& s : in) {
      if (ids > 0 && x.empty()) {
        Tensor t = Tensor::zeros(with_batch(batch, s), DType::I32);
        for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(rng.below(ids));
        x.push_back(t);
        continue;
      }
      x.push_back(random_normal(with_batch(batch, s), dtype, rng));
    }
    return x;
  }
  Tensor forward(const StepContext& ctx, const std::vector<Tensor>& x) {
    Tensor y = Tensor::zeros(with_batch(x[0].dim(0), out), dtype);
    layer->forward(ctx, x, y);
    return y;
  }
  // Zeroes the parameter gradients, then returns the input gradients (all requested; ids have
  // none: undefined).
  std::vector<Tensor> backward(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y,
                               const Tensor& dy) {
    for (auto& g : grads) g.zero_();
    std::vector<Tensor> dx;
    for (const auto& xi : x) dx.push_back(is_floating(xi.dtype()) ? Tensor::zeros(xi.shape(), dtype) : Tensor());
    layer->backward(ctx, x, y, dy, dx);
    return dx;
  }
  // Re-binds copies of another TestLayer's parameters and buffers, cast to this dtype.
  void copy_state_from(const TestLayer& o) {
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_from(cast(o.params[i], dtype));
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_from(cast(o.buffers[i], buffers[i].dtype()));
  }
};

// A layer's cfg entry: type, name, arguments and inputs (empty: the previous layer).
inline LayerSpec layer_spec(const std::string& type, const std::string& name, std::map<std::string, ArgValue> args,
                            std::vector<std::string> inputs = {}) {
  LayerSpec s;
  s.type = type;
  s.name = name;
  s.args = std::move(args);
  s.inputs = std::move(inputs);
  return s;
}

inline std::unique_ptr<Layer> make_layer(const std::string& type, const std::map<std::string, ArgValue>& args,
                                         const std::string& name = "l") {
  return models::layer_registry().create(layer_spec(type, name, args));
}

inline TestLayer make_test_layer(const LayerCase& c, DType dtype, uint64_t seed) {
  TestLayer t;
  t.layer = make_layer(c.type, c.args, c.name);
  t.in = c.in;
  t.out = t.layer->setup(c.in);
  t.dtype = dtype;
  t.ids = c.ids;
  Rng rng(seed, 17);
  for (const auto& d : t.layer->declare_params()) {
    if (d.trainable) {
      t.params.push_back(random_uniform(d.shape, dtype, rng));
      t.grads.push_back(Tensor::zeros(d.shape, dtype));
    } else if (is_floating(d.dtype)) {
      t.buffers.push_back(random_uniform(d.shape, dtype, rng, 0.5, 1.5));
    } else {
      t.buffers.push_back(Tensor::zeros(d.shape, d.dtype));
    }
  }
  t.layer->bind(t.params, t.grads, t.buffers);
  return t;
}

// max |a - b| / max |b|: the error of a relative to b, normalised by b's scale.
inline double normalised_error(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    num = std::max(num, std::abs(get(a, i) - get(b, i)));
    den = std::max(den, std::abs(get(b, i)));
  }
  return den > 0 ? num / den : num;
}

}  // namespace dp::test
