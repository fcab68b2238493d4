#include "models/layers/flatten/flatten.h"

#include "kernels/cpu/layout.h"
#include "models/layers/common.h"

namespace dp::models {

Shape Flatten::setup(const std::vector<Shape>& in) {
  in_ = single_input(*this, in);
  return {shape_numel(in_)};
}

// The output is in PyTorch's flatten order (NCHW), which a linear layer after it relies on: from
// a channels-last input (the oneDNN backend) that is the NHWC -> NCHW transpose.
void Flatten::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  const int64_t N = x[0].dim(0);
  check_batched(*this, x[0], x[0].dtype(), N, in_, "input");
  check_batched(*this, y, x[0].dtype(), N, {shape_numel(in_)}, "output");
  if (!is_channels_last(ctx, x[0])) return y.copy_from(x[0].reshape(y.shape()));
  dispatch_float(*this, x[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::nhwc_to_nchw<T>(y.data<T>(), x[0].data<T>(), N, in_[0], in_[1] * in_[2]);
  });
}

void Flatten::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                           std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  const int64_t N = x[0].dim(0);
  check_batched(*this, dy, x[0].dtype(), N, {shape_numel(in_)}, "output gradient");
  check_batched(*this, dx[0], x[0].dtype(), N, in_, "input gradient");
  if (!is_channels_last(ctx, dx[0])) return dx[0].copy_from(dy.reshape(dx[0].shape()));
  dispatch_float(*this, x[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::nchw_to_nhwc<T>(dx[0].data<T>(), dy.data<T>(), N, in_[0], in_[1] * in_[2]);
  });
}

void register_flatten(LayerRegistry& r) {
  r.add("flatten", {}, [](const std::string& name, const LayerArgs&) { return std::make_unique<Flatten>(name); });
}

}  // namespace dp::models
