#include "models/layers/global_avgpool/global_avgpool.h"

#include "kernels/cpu/pool2d.h"
#include "models/layers/common.h"

namespace dp::models {

Shape GlobalAvgPool::setup(const std::vector<Shape>& in) {
  expect_single_input_rank(*this, in, 3, "[C, H, W]");
  C_ = in[0][0], H_ = in[0][1], W_ = in[0][2];
  return {C_, 1, 1};
}

void GlobalAvgPool::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, x[0], dt, N, {C_, H_, W_}, "input");
  check_batched(*this, y, dt, N, {C_, 1, 1}, "output");
  if (forward_onednn(ctx, x[0], y)) return;
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::global_avgpool_forward<T>(y.data<T>(), x[0].data<T>(), N * C_, H_ * W_);
  });
}

void GlobalAvgPool::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                                 std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, dy, dt, N, {C_, 1, 1}, "output gradient");
  check_batched(*this, dx[0], dt, N, {C_, H_, W_}, "input gradient");
  if (backward_onednn(ctx, x[0], dy, dx[0])) return;
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::global_avgpool_backward<T>(dx[0].data<T>(), dy.data<T>(), N * C_, H_ * W_);
  });
}

void register_global_avgpool(LayerRegistry& r) {
  r.add("global_avgpool", {},
        [](const std::string& name, const LayerArgs&) { return std::make_unique<GlobalAvgPool>(name); });
}

}  // namespace dp::models
