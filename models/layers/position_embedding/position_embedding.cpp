#include "models/layers/position_embedding/position_embedding.h"

#include "models/layers/common.h"
#include "models/layers/position_embedding/position_embedding_ref.h"

namespace dp::models {

PositionEmbedding::PositionEmbedding(std::string name, int64_t num_positions, double init_std)
    : TableLayer(std::move(name), num_positions, 0, init_std) {}

Shape PositionEmbedding::setup(const std::vector<Shape>& in) {
  expect_single_input_rank(*this, in, 2, "[T, C] (a sequence of T vectors)");
  T_ = in[0][0], dim_ = in[0][1];
  if (T_ > num_)
    DP_THROW_USER("{}: the input has {} positions, more than num_positions = {} (for a GPT model: the samples are "
                  "longer than model.block_size)",
                  layer_str(*this), T_, num_);
  return in[0];
}

void PositionEmbedding::forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, x[0], dt, N, {T_, dim_}, "input");
  check_batched(*this, y, dt, N, {T_, dim_}, "output");
  check_tensor(*this, params_.at(0), dt, {num_, dim_}, "weight");
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::position_embedding_forward<T>(y.data<T>(), x[0].data<T>(), params_[0].data<T>(), N, T_, dim_);
  });
}

void PositionEmbedding::backward_cpu(const StepContext&, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                                     std::vector<Tensor>& dx) {
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, dy, dt, N, {T_, dim_}, "output gradient");
  check_grads(*this, dt);
  if (dx[0].defined()) {
    check_batched(*this, dx[0], dt, N, {T_, dim_}, "input gradient");
    dx[0].copy_from(dy);
  }
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::position_embedding_backward<T>(grads_[0].data<T>(), dy.data<T>(), N, T_, dim_);
  });
}

void register_position_embedding(LayerRegistry& r) {
  r.add("position_embedding", {int_arg("num_positions", std::nullopt, 1), float_arg("init_std", 1.0, 0.0)},
        [](const std::string& name, const LayerArgs& a) {
          return std::make_unique<PositionEmbedding>(name, a.i("num_positions"), a.f("init_std"));
        });
}

}  // namespace dp::models
