#include "models/layers/relu/relu.h"

#include "kernels/cpu/elementwise.h"
#include "models/layers/common.h"

namespace dp::models {

Shape ReLU::setup(const std::vector<Shape>& in) {
  shape_ = single_input(*this, in);
  return shape_;
}

void ReLU::forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  check_same_shape_io(*this, x[0], y, shape_);
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::relu_forward<T>(y.data<T>(), x[0].data<T>(), y.numel());
  });
}

void ReLU::backward_cpu(const StepContext&, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                        std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, y, dt, N, shape_, "output");
  check_batched(*this, dy, dt, N, shape_, "output gradient");
  check_batched(*this, dx[0], dt, N, shape_, "input gradient");
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::relu_backward<T>(dx[0].data<T>(), dy.data<T>(), y.data<T>(), y.numel());
  });
}

void register_relu(LayerRegistry& r) {
  r.add("relu", {}, [](const std::string& name, const LayerArgs&) { return std::make_unique<ReLU>(name); });
}

}  // namespace dp::models
