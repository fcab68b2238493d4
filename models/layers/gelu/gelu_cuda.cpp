// GELU's GPU path: models/layers/gelu/gelu_kernels.h on the compute stream, in ctx.compute (f32,
// bf16, f16); element-wise, so the same whatever the memory layout. The backward reads x.
#include "models/layers/common.h"
#include "models/layers/gelu/gelu.h"
#include "models/layers/gelu/gelu_kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"

namespace dp::models {

void Gelu::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, x[0], ctx.compute, s, "input");
  check_gpu_tensor(*this, y, ctx.compute, s, "output");
  CHECK_CUDA(kernels::cuda::gelu_forward(ctx.compute, y.raw(), x[0].raw(), y.numel(), tanh_, ctx.gpu->compute()));
}

void Gelu::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                         std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, x[0], ctx.compute, s, "input");
  check_gpu_tensor(*this, dy, ctx.compute, s, "output gradient");
  check_gpu_tensor(*this, dx[0], ctx.compute, s, "input gradient");
  CHECK_CUDA(kernels::cuda::gelu_backward(ctx.compute, dx[0].raw(), dy.raw(), x[0].raw(), dy.numel(), tanh_,
                                          ctx.gpu->compute()));
}

}  // namespace dp::models
