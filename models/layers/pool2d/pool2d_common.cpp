#include "models/layers/pool2d/pool2d_common.h"

#include "models/layers/common.h"

namespace dp::models {

std::vector<ArgSpec> pool2d_arg_specs() {
  return {int_arg("kernel", std::nullopt, 1), int_arg("stride", 0, 0), int_arg("padding", 0, 0)};
}

kernels::cpu::Pool2dDims setup_pool2d(const Layer& layer, const std::vector<Shape>& in, int64_t kernel, int64_t stride,
                                      int64_t padding) {
  expect_single_input_rank(layer, in, 3, "[C, H, W]");
  DP_CHECK(kernel >= 1 && stride >= 0 && padding >= 0, "{}: invalid arguments", layer_str(layer));
  if (stride == 0) stride = kernel;
  // A window made only of padding would have no input to take: torch forbids it the same way.
  if (2 * padding > kernel)
    DP_THROW_USER("{}: padding {} is more than half the kernel {}", layer_str(layer), padding, kernel);
  kernels::cpu::Pool2dDims d{0, in[0][0], in[0][1], in[0][2], kernel, stride, padding, 0, 0};
  d.OH = window_out_size(d.H, kernel, stride, padding);
  d.OW = window_out_size(d.W, kernel, stride, padding);
  if (d.OH < 1 || d.OW < 1)
    DP_THROW_USER("{}: kernel {} with padding {} does not fit the {}x{} input", layer_str(layer), kernel, padding, d.H,
                  d.W);
  return d;
}

Shape Pool2dLayer::setup(const std::vector<Shape>& in) {
  d_ = setup_pool2d(*this, in, kernel_, stride_, padding_);
  return {d_.C, d_.OH, d_.OW};
}

kernels::cpu::Pool2dDims Pool2dLayer::forward_dims(const Tensor& x, const Tensor& y) const {
  kernels::cpu::Pool2dDims d = d_;
  d.N = x.dim(0);
  check_batched(*this, x, x.dtype(), d.N, {d.C, d.H, d.W}, "input");
  check_batched(*this, y, x.dtype(), d.N, {d.C, d.OH, d.OW}, "output");
  return d;
}

kernels::cpu::Pool2dDims Pool2dLayer::backward_dims(const Tensor& x, const Tensor& dy, const Tensor& dx) const {
  kernels::cpu::Pool2dDims d = d_;
  d.N = x.dim(0);
  check_batched(*this, dy, x.dtype(), d.N, {d.C, d.OH, d.OW}, "output gradient");
  check_batched(*this, dx, x.dtype(), d.N, {d.C, d.H, d.W}, "input gradient");
  return d;
}

void Pool2dLayer::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  const kernels::cpu::Pool2dDims d = forward_dims(x[0], y);
  if (forward_onednn(ctx, x[0], y, d)) return;
  dispatch_float(*this, x[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (kind() == PoolKind::Max) kernels::cpu::maxpool2d_forward<T>(y.data<T>(), x[0].data<T>(), d);
    else kernels::cpu::avgpool2d_forward<T>(y.data<T>(), x[0].data<T>(), d);
  });
}

void Pool2dLayer::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                               std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  const kernels::cpu::Pool2dDims d = backward_dims(x[0], dy, dx[0]);
  if (backward_onednn(ctx, x[0], dy, dx[0], d)) return;
  dispatch_float(*this, x[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (kind() == PoolKind::Max) kernels::cpu::maxpool2d_backward<T>(dx[0].data<T>(), dy.data<T>(), x[0].data<T>(), d);
    else kernels::cpu::avgpool2d_backward<T>(dx[0].data<T>(), dy.data<T>(), d);
  });
}

}  // namespace dp::models
