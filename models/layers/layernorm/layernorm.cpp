#include "models/layers/layernorm/layernorm.h"

#include "models/layers/common.h"
#include "models/layers/layernorm/layernorm_ref.h"

namespace dp::models {

LayerNorm::LayerNorm(std::string name, double eps, bool bias) : Layer(std::move(name)), eps_(eps), bias_(bias) {}

Shape LayerNorm::setup(const std::vector<Shape>& in) {
  if (single_input(*this, in).empty()) DP_THROW_USER("{}: the input is a scalar per sample; layernorm normalises a last dimension", layer_str(*this));
  shape_ = in[0];
  C_ = shape_.back();
  return shape_;
}

std::vector<ParamDecl> LayerNorm::declare_params() const {
  std::vector<ParamDecl> p{{"weight", {C_}, true, DType::F32, init_constant(1.0)}};
  if (bias_) p.push_back({"bias", {C_}, true, DType::F32, nullptr});
  return p;
}

void LayerNorm::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  check_same_shape_io(*this, x[0], y, shape_);
  check_tensor(*this, params_.at(0), dt, {C_}, "weight");
  if (bias_) check_tensor(*this, params_.at(1), dt, {C_}, "bias");
  if (use_onednn(ctx, dt)) return forward_onednn(ctx, x[0], y);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::layernorm_forward<T>(y.data<T>(), x[0].data<T>(), params_[0].data<T>(),
                                       bias_ ? params_[1].data<T>() : nullptr, x[0].numel() / C_, C_, eps_);
  });
}

void LayerNorm::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                             std::vector<Tensor>& dx) {
  const DType dt = x[0].dtype();
  check_backward_io(*this, x[0], dy, dx[0], shape_, shape_);
  check_grads(*this, dt);
  if (use_onednn(ctx, dt)) return backward_onednn(ctx, x[0], dy, dx[0]);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::layernorm_backward<T>(data_or_null<T>(dx[0]), grads_[0].data<T>(),
                                        bias_ ? grads_[1].data<T>() : nullptr, dy.data<T>(), x[0].data<T>(),
                                        params_[0].data<T>(), x[0].numel() / C_, C_, eps_);
  });
}

void register_layernorm(LayerRegistry& r) {
  r.add("layernorm", {float_arg("eps", 1e-5, 1e-30), bool_arg("bias", true)},
        [](const std::string& name, const LayerArgs& a) {
          return std::make_unique<LayerNorm>(name, a.f("eps"), a.b("bias"));
        });
}

}  // namespace dp::models
