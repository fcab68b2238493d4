#include "models/layers/avgpool2d.h"

#include "models/layers/common.h"
#include "models/layers/pool2d_common.h"

namespace dp::models {

AvgPool2d::AvgPool2d(std::string name, int64_t kernel, int64_t stride, int64_t padding)
    : Layer(std::move(name)), kernel_(kernel), stride_(stride), padding_(padding) {}

Shape AvgPool2d::setup(const std::vector<Shape>& in) {
  d_ = setup_pool2d(*this, in, kernel_, stride_, padding_);
  return {d_.C, d_.OH, d_.OW};
}

void AvgPool2d::forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  kernels::cpu::Pool2dDims d = d_;
  d.N = x[0].dim(0);
  check_batched(*this, x[0], dt, d.N, {d.C, d.H, d.W}, "input");
  check_batched(*this, y, dt, d.N, {d.C, d.OH, d.OW}, "output");
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::avgpool2d_forward<T>(y.data<T>(), x[0].data<T>(), d);
  });
}

void AvgPool2d::backward_cpu(const StepContext&, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                             std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  const DType dt = x[0].dtype();
  kernels::cpu::Pool2dDims d = d_;
  d.N = x[0].dim(0);
  check_batched(*this, dy, dt, d.N, {d.C, d.OH, d.OW}, "output gradient");
  check_batched(*this, dx[0], dt, d.N, {d.C, d.H, d.W}, "input gradient");
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::avgpool2d_backward<T>(dx[0].data<T>(), dy.data<T>(), d);
  });
}

void register_avgpool2d(LayerRegistry& r) {
  r.add("avgpool2d", pool2d_arg_specs(), [](const std::string& name, const LayerArgs& a) {
    return std::make_unique<AvgPool2d>(name, a.i("kernel"), a.i("stride"), a.i("padding"));
  });
}

}  // namespace dp::models
