// Add's GPU path: kernels/cuda/elementwise.h forward, device copies backward, on the compute
// stream in ctx.compute; elementwise, so the same whatever the memory layout (both inputs and
// the output share it).
#include "models/layers/add/add.h"

#include "kernels/cuda/elementwise.h"
#include "models/layers/common.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"

namespace dp::models {

void Add::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, x[0], ctx.compute, s, "input 0");
  check_gpu_tensor(*this, x[1], ctx.compute, s, "input 1");
  check_gpu_tensor(*this, y, ctx.compute, s, "output");
  // A folded ReLU is the CPU plan's only (FusionPath::CpuOnednn): no kernel here applies it.
  DP_CHECK(epilogue() == Epilogue::None, "{}: a {} epilogue on GPU tensors", layer_str(*this), epilogue_name(epilogue()));
  CHECK_CUDA(kernels::cuda::add(ctx.compute, y.raw(), x[0].raw(), x[1].raw(), y.numel(), ctx.gpu->compute()));
}

void Add::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                        std::vector<Tensor>& dx) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, dy, ctx.compute, s, "output gradient");
  for (auto& g : dx) {
    if (!g.defined()) continue;
    check_gpu_tensor(*this, g, ctx.compute, s, "input gradient");
    CHECK_CUDA(cudaMemcpyAsync(g.raw(), dy.raw(), dy.nbytes(), cudaMemcpyDeviceToDevice, ctx.gpu->compute()));
  }
}

}  // namespace dp::models
