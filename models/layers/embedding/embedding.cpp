#include "models/layers/embedding/embedding.h"

#include "models/layers/common.h"
#include "models/layers/embedding/embedding_ref.h"

namespace dp::models {

Embedding::Embedding(std::string name, int64_t num_embeddings, int64_t embedding_dim, double init_std)
    : TableLayer(std::move(name), num_embeddings, embedding_dim, init_std) {}

Shape Embedding::setup(const std::vector<Shape>& in) {
  in_ = single_input(*this, in);
  Shape out = in_;
  out.push_back(dim_);
  return out;
}

void Embedding::check_ids(const Tensor& ids) const {
  if (ids.dtype() != DType::I32)
    DP_THROW_USER("{}: input is {}, but an embedding takes integer ids (i32): it must take the model input of token "
                  "ids, not another layer's output",
                  layer_str(*this), ids.describe());
  check_batched(*this, ids, DType::I32, ids.dim(0), in_, "input");
  const int32_t* p = ids.data<int32_t>();
  const int64_t per_sample = shape_numel(in_);
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (p[i] < 0 || p[i] >= num_)
      // Layer::forward names the layer and the pass.
      DP_THROW_USER("id {} at sample {}, position {} is outside [0, {}) (num_embeddings; for a GPT model "
                    "model.vocab_size): the data holds ids the model has no row for",
                    p[i], i / per_sample, i % per_sample, num_);
}

void Embedding::forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) {
  check_ids(x[0]);
  const DType dt = y.dtype();
  const int64_t N = x[0].dim(0);
  Shape out = in_;
  out.push_back(dim_);
  check_batched(*this, y, dt, N, out, "output");
  check_tensor(*this, params_.at(0), dt, {num_, dim_}, "weight");
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::embedding_forward<T>(y.data<T>(), x[0].data<int32_t>(), params_[0].data<T>(), x[0].numel(), dim_);
  });
}

void Embedding::backward_cpu(const StepContext&, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                             std::vector<Tensor>& dx) {
  DP_CHECK(!dx[0].defined(), "{}: ids have no gradient, but one was asked for", layer_str(*this));
  const DType dt = y.dtype();
  check_tensor(*this, dy, dt, y.shape(), "output gradient");
  check_grads(*this, dt);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::embedding_backward<T>(grads_[0].data<T>(), x[0].data<int32_t>(), dy.data<T>(), x[0].numel(), dim_);
  });
}

void register_embedding(LayerRegistry& r) {
  r.add("embedding",
        {int_arg("num_embeddings", std::nullopt, 1), int_arg("embedding_dim", std::nullopt, 1),
         float_arg("init_std", 1.0, 0.0)},
        [](const std::string& name, const LayerArgs& a) {
          return std::make_unique<Embedding>(name, a.i("num_embeddings"), a.i("embedding_dim"), a.f("init_std"));
        });
}

}  // namespace dp::models
