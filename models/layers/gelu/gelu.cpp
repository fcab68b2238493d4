#include "models/layers/gelu/gelu.h"

#include "models/layers/common.h"
#include "models/layers/gelu/gelu_ref.h"
#include "models/layers/gelu/gelu_tanh_f32.h"

namespace dp::models {

Gelu::Gelu(std::string name, bool tanh_approximation) : Layer(std::move(name)), tanh_(tanh_approximation) {}

Shape Gelu::setup(const std::vector<Shape>& in) {
  shape_ = single_input(*this, in);
  return shape_;
}

void Gelu::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  check_same_shape_io(*this, x[0], y, shape_);
  if (use_onednn(ctx, dt) && tanh_) return kernels::cpu::gelu_tanh_f32_forward(y.data<float>(), x[0].data<float>(), y.numel());
  if (use_onednn(ctx, dt)) return forward_onednn(x[0], y);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::gelu_forward<T>(y.data<T>(), x[0].data<T>(), y.numel(), tanh_);
  });
}

void Gelu::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                        std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, dy, dt, N, shape_, "output gradient");
  check_batched(*this, dx[0], dt, N, shape_, "input gradient");
  if (use_onednn(ctx, dt) && tanh_)
    return kernels::cpu::gelu_tanh_f32_backward(dx[0].data<float>(), dy.data<float>(), x[0].data<float>(), dy.numel());
  if (use_onednn(ctx, dt)) return backward_onednn(x[0], dy, dx[0]);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::gelu_backward<T>(dx[0].data<T>(), dy.data<T>(), x[0].data<T>(), dy.numel(), tanh_);
  });
}

void register_gelu(LayerRegistry& r) {
  r.add("gelu", {choice_arg("approximate", "tanh", {"tanh", "none"})},
        [](const std::string& name, const LayerArgs& a) { return std::make_unique<Gelu>(name, a.s("approximate") == "tanh"); });
}

}  // namespace dp::models
