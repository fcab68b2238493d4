// ReLU's GPU path: kernels/cuda/elementwise.h on the compute stream, in ctx.compute (f32, bf16,
// f16); elementwise, so the same whatever the memory layout.
#include "models/layers/relu/relu.h"

#include "kernels/cuda/elementwise.h"
#include "models/layers/common.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"

namespace dp::models {

void ReLU::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, x[0], ctx.compute, s, "input");
  check_gpu_tensor(*this, y, ctx.compute, s, "output");
  CHECK_CUDA(kernels::cuda::relu_forward(ctx.compute, y.raw(), x[0].raw(), y.numel(), ctx.gpu->compute()));
}

void ReLU::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                         std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, y, ctx.compute, s, "output");
  check_gpu_tensor(*this, dy, ctx.compute, s, "output gradient");
  check_gpu_tensor(*this, dx[0], ctx.compute, s, "input gradient");
  CHECK_CUDA(kernels::cuda::relu_backward(ctx.compute, dx[0].raw(), dy.raw(), y.raw(), y.numel(), ctx.gpu->compute()));
}

}  // namespace dp::models
