#include "models/layers/linear/linear.h"

#include <algorithm>
#include <cmath>

#include "models/layers/linear/linear_ref.h"
#include "models/layers/common.h"

namespace dp::models {

Linear::Linear(std::string name, int64_t out_features, bool bias, double init_std, std::string tie_weight,
               int64_t pad_out_to)
    : Layer(std::move(name)), out_(out_features), pad_out_to_(pad_out_to), bias_(bias), init_std_(init_std),
      tie_weight_(std::move(tie_weight)) {}

void Linear::resolve_auto_padding(bool gpu) {
  if (pad_out_to_ == 0) pad_out_to_ = gpu ? kGpuRowPadding : 1;
}

Shape Linear::setup(const std::vector<Shape>& in) {
  const size_t rank = single_input(*this, in).size();
  if (rank != 1 && rank != 2)
    DP_THROW_USER("{}: input per-sample shape is {}, but linear takes [in_features] or [T, in_features] (applied to "
                  "the last dimension); add a 'flatten' layer before it",
                  layer_str(*this), shape_str(in[0]));
  ld_out_ = padded_row_stride(out_, std::max<int64_t>(pad_out_to_, 1));
  if (padded() && bias_)
    DP_THROW_USER("{}: pad_out_to = {} pads the output rows of a layer without a bias only (GPT's LM head); set "
                  "bias = false or pad_out_to = 1",
                  layer_str(*this), pad_out_to_);
  in_shape_ = in[0];
  in_ = in_shape_.back();
  out_shape_ = in_shape_;
  out_shape_.back() = ld_out_;
  return out_shape_;
}

std::vector<ParamDecl> Linear::declare_params() const {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_));
  const InitFn w_init = init_std_ > 0 ? init_normal(init_std_) : init_uniform(bound);
  ParamDecl w{"weight", {out_, in_}, true, DType::F32, w_init};
  w.tied_to = tie_weight_;
  std::vector<ParamDecl> p{w};
  if (bias_) p.push_back({"bias", {out_}, true, DType::F32, init_std_ > 0 ? nullptr : init_uniform(bound)});
  return p;
}

void Linear::check_params(DType dtype) const {
  DP_CHECK(params_.size() == (bias_ ? 2u : 1u), "{}: {} parameters bound", layer_str(*this), params_.size());
  check_tensor(*this, params_[0], dtype, {out_, in_}, "weight");
  if (bias_) check_tensor(*this, params_[1], dtype, {out_}, "bias");
}

void Linear::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, x[0], dt, N, in_shape_, "input");
  check_batched(*this, y, dt, N, out_shape_, "output");
  check_params(dt);
  // The CPU plan folds a ReLU at most (into the oneDNN path); the GPU's others are its alone.
  DP_CHECK(epilogue() == Epilogue::None || epilogue() == Epilogue::Relu, "{}: a {} epilogue on CPU tensors",
           layer_str(*this), epilogue_name(epilogue()));
  if (use_onednn(ctx, dt)) return forward_onednn(ctx, x[0], y);
  check_reference_layout(*this, ctx, x[0]);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::linear_forward<T>(y.data<T>(), x[0].data<T>(), params_[0].data<T>(),
                                    bias_ ? params_[1].data<T>() : nullptr, rows(x[0]), in_, out_, ld_out_);
  });
}

void Linear::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                          std::vector<Tensor>& dx) {
  const DType dt = x[0].dtype();
  check_backward_io(*this, x[0], dy, dx[0], in_shape_, out_shape_);
  check_params(dt);
  check_grads(*this, dt);
  if (use_onednn(ctx, dt)) return backward_onednn(ctx, x[0], y, dy, dx[0]);
  check_reference_layout(*this, ctx, x[0]);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::linear_backward<T>(data_or_null<T>(dx[0]), grads_[0].data<T>(),
                                     bias_ ? grads_[1].data<T>() : nullptr, dy.data<T>(), x[0].data<T>(),
                                     params_[0].data<T>(), rows(x[0]), in_, out_, ld_out_);
  });
}

void register_linear(LayerRegistry& r) {
  ArgSpec tie;
  tie.name = "tie_weight";
  tie.kind = ArgKind::String;
  tie.default_value = ArgValue{std::string()};
  r.add("linear",
        {int_arg("out_features", std::nullopt, 1), bool_arg("bias", true), float_arg("init_std", 0.0, 0.0), tie,
         int_arg("pad_out_to", int64_t{1}, 0)},
        [](const std::string& name, const LayerArgs& a) {
          return std::make_unique<Linear>(name, a.i("out_features"), a.b("bias"), a.f("init_std"), a.s("tie_weight"),
                                          a.i("pad_out_to"));
        });
}

}  // namespace dp::models
