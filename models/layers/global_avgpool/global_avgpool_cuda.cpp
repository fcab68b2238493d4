// GlobalAvgPool's GPU path: the kernels of models/layers/global_avgpool/global_avgpool_kernels.h (the CPU reference is
// kernels/cpu/pool2d.h's global_avgpool_*).
#include "models/layers/global_avgpool/global_avgpool.h"

#include "models/layers/global_avgpool/global_avgpool_kernels.h"
#include "models/layers/common.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"

namespace dp::models {

void GlobalAvgPool::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu != nullptr, "{}: GPU tensors without a GPU context (StepContext::gpu)", layer_str(*this));
  const int64_t N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], ctx.compute, {N, C_, H_, W_}, "input");
  check_gpu_tensor(*this, y, ctx.compute, {N, C_, 1, 1}, "output");
  CHECK_CUDA(kernels::cuda::global_avgpool_forward(y.raw(), x[0].raw(), ctx.compute, N, C_, H_ * W_,
                                                   is_channels_last(ctx, x[0]), ctx.gpu->compute()));
}

void GlobalAvgPool::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&,
                                  const Tensor& dy, std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  DP_CHECK(ctx.gpu != nullptr, "{}: GPU tensors without a GPU context (StepContext::gpu)", layer_str(*this));
  const int64_t N = x[0].dim(0);
  check_gpu_tensor(*this, dy, ctx.compute, {N, C_, 1, 1}, "output gradient");
  check_gpu_tensor(*this, dx[0], ctx.compute, {N, C_, H_, W_}, "input gradient");
  CHECK_CUDA(kernels::cuda::global_avgpool_backward(dx[0].raw(), dy.raw(), ctx.compute, N, C_, H_ * W_,
                                                    is_channels_last(ctx, dx[0]), ctx.gpu->compute()));
}

}  // namespace dp::models
