#include "models/layers/conv2d/conv2d.h"

#include <cmath>

#include "models/layers/common.h"

namespace dp::models {

Conv2d::Conv2d(std::string name, Conv2dArgs args) : Layer(std::move(name)), a_(std::move(args)) {
  DP_CHECK(a_.out_channels >= 1 && a_.kernel >= 1 && a_.stride >= 1 && a_.padding >= 0 && a_.groups >= 1,
           "{}: invalid arguments (the registry validates them)", layer_str(*this));
  DP_CHECK(a_.init == "default" || a_.init == "kaiming_normal_fan_out", "{}: unknown init '{}'", layer_str(*this),
           a_.init);
}

Shape Conv2d::setup(const std::vector<Shape>& in) {
  expect_single_input_rank(*this, in, 3, "[C, H, W]");
  C_ = in[0][0], H_ = in[0][1], W_ = in[0][2];
  if (C_ % a_.groups != 0)
    DP_THROW_USER("{}: input has {} channels, not divisible by groups={}", layer_str(*this), C_, a_.groups);
  if (a_.out_channels % a_.groups != 0)
    DP_THROW_USER("{}: out_channels={} is not divisible by groups={}", layer_str(*this), a_.out_channels, a_.groups);
  OH_ = window_out_size(H_, a_.kernel, a_.stride, a_.padding);
  OW_ = window_out_size(W_, a_.kernel, a_.stride, a_.padding);
  if (OH_ < 1 || OW_ < 1)
    DP_THROW_USER("{}: kernel {} with padding {} does not fit the {}x{} input (output would be {}x{})",
                  layer_str(*this), a_.kernel, a_.padding, H_, W_, OH_, OW_);
  return {a_.out_channels, OH_, OW_};
}

std::vector<ParamDecl> Conv2d::declare_params() const {
  const int64_t k2 = a_.kernel * a_.kernel;
  const Shape wshape{a_.out_channels, C_ / a_.groups, a_.kernel, a_.kernel};
  InitFn winit, binit;
  if (a_.init == "kaiming_normal_fan_out") {
    // torch.nn.init.kaiming_normal_(mode="fan_out", nonlinearity="relu"): fan_out is
    // weight.size(0) * kernel area (torch does not divide by groups); torchvision zeroes biases.
    winit = init_normal(std::sqrt(2.0 / static_cast<double>(a_.out_channels * k2)));
    binit = init_constant(0.0);
  } else {
    // kaiming_uniform_(a=sqrt(5)) reduces to U(+-1/sqrt(fan_in)); the bias uses the same bound.
    const double bound = 1.0 / std::sqrt(static_cast<double>(C_ / a_.groups * k2));
    winit = init_uniform(bound);
    binit = init_uniform(bound);
  }
  std::vector<ParamDecl> p{{"weight", wshape, true, DType::F32, winit}};
  if (a_.bias) p.push_back({"bias", {a_.out_channels}, true, DType::F32, binit});
  return p;
}

kernels::cpu::Conv2dDims Conv2d::dims(int64_t batch) const {
  return {batch, C_, H_, W_, a_.out_channels, a_.kernel, a_.stride, a_.padding, a_.groups, OH_, OW_};
}

void Conv2d::check_params(DType dtype) const {
  DP_CHECK(params_.size() == (a_.bias ? 2u : 1u), "{}: {} parameters bound", layer_str(*this), params_.size());
  check_tensor(*this, params_[0], dtype, {a_.out_channels, C_ / a_.groups, a_.kernel, a_.kernel}, "weight");
  if (a_.bias) check_tensor(*this, params_[1], dtype, {a_.out_channels}, "bias");
}

void Conv2d::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, x[0], dt, N, {C_, H_, W_}, "input");
  check_batched(*this, y, dt, N, {a_.out_channels, OH_, OW_}, "output");
  check_params(dt);
  if (use_onednn(ctx, dt)) return forward_onednn(ctx, x[0], y);
  check_reference_layout(*this, ctx, x[0]);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::conv2d_forward<T>(y.data<T>(), x[0].data<T>(), params_[0].data<T>(),
                                    a_.bias ? params_[1].data<T>() : nullptr, dims(N));
  });
}

void Conv2d::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                          std::vector<Tensor>& dx) {
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_backward_io(*this, x[0], dy, dx[0], {C_, H_, W_}, {a_.out_channels, OH_, OW_});
  check_params(dt);
  check_grads(*this, dt);
  if (use_onednn(ctx, dt)) return backward_onednn(ctx, x[0], y, dy, dx[0]);
  check_reference_layout(*this, ctx, x[0]);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::conv2d_backward<T>(data_or_null<T>(dx[0]), grads_[0].data<T>(),
                                     a_.bias ? grads_[1].data<T>() : nullptr, dy.data<T>(), x[0].data<T>(),
                                     params_[0].data<T>(), dims(N));
  });
}

void register_conv2d(LayerRegistry& r) {
  r.add("conv2d",
        {int_arg("out_channels", std::nullopt, 1), int_arg("kernel", std::nullopt, 1), int_arg("stride", 1, 1),
         int_arg("padding", 0, 0), int_arg("groups", 1, 1), bool_arg("bias", true),
         choice_arg("init", "default", {"default", "kaiming_normal_fan_out"})},
        [](const std::string& name, const LayerArgs& a) {
          Conv2dArgs c;
          c.out_channels = a.i("out_channels");
          c.kernel = a.i("kernel");
          c.stride = a.i("stride");
          c.padding = a.i("padding");
          c.groups = a.i("groups");
          c.bias = a.b("bias");
          c.init = a.s("init");
          return std::make_unique<Conv2d>(name, c);
        });
}

}  // namespace dp::models
