#include "models/layers/pool2d/maxpool2d.h"

#include "models/layers/common.h"

namespace dp::models {

void MaxPool2d::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  const kernels::cpu::Pool2dDims d = forward_dims(x[0], y);
  if (forward_onednn(ctx, x[0], y, d)) return;
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::maxpool2d_forward<T>(y.data<T>(), x[0].data<T>(), d);
  });
}

// The chosen maxima are recomputed from x (same rule, same result) instead of stored indices.
void MaxPool2d::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                             std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  const DType dt = x[0].dtype();
  const kernels::cpu::Pool2dDims d = backward_dims(x[0], dy, dx[0]);
  if (backward_onednn(ctx, x[0], dy, dx[0], d)) return;
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::maxpool2d_backward<T>(dx[0].data<T>(), dy.data<T>(), x[0].data<T>(), d);
  });
}

void register_maxpool2d(LayerRegistry& r) {
  r.add("maxpool2d", pool2d_arg_specs(), [](const std::string& name, const LayerArgs& a) {
    return std::make_unique<MaxPool2d>(name, a.i("kernel"), a.i("stride"), a.i("padding"));
  });
}

}  // namespace dp::models
