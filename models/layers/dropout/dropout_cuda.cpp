// Dropout's GPU path: models/layers/dropout/dropout_kernels.h on the compute stream in ctx.compute, with the CPU
// twin's mask bit for bit: word i of the mask belongs to element i of the logical NCHW order,
// so a channels-last 4-D tensor goes through the _nhwc kernels, which mask each element by its
// logical index wherever it lies in memory. Eval or p = 0: a device copy.
#include "models/layers/dropout/dropout.h"

#include "models/layers/dropout/dropout_kernels.h"
#include "models/layers/common.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"

namespace dp::models {

namespace {
// out = mask(in) for the step's (seed, stream), in in's layout.
void apply(const StepContext& ctx, const Tensor& out, const Tensor& in, double p, uint64_t stream_id, bool forward) {
  cudaStream_t s = ctx.gpu->compute();
  if (is_channels_last(ctx, in)) {
    const int64_t N = in.dim(0), C = in.dim(1), H = in.dim(2), W = in.dim(3);
    CHECK_CUDA(forward ? kernels::cuda::dropout_forward_nhwc(ctx.compute, out.raw(), in.raw(), N, C, H, W, p, ctx.seed,
                                                             stream_id, s)
                       : kernels::cuda::dropout_backward_nhwc(ctx.compute, out.raw(), in.raw(), N, C, H, W, p,
                                                              ctx.seed, stream_id, s));
  } else {
    CHECK_CUDA(forward ? kernels::cuda::dropout_forward(ctx.compute, out.raw(), in.raw(), in.numel(), p, ctx.seed,
                                                        stream_id, s)
                       : kernels::cuda::dropout_backward(ctx.compute, out.raw(), in.raw(), in.numel(), p, ctx.seed,
                                                         stream_id, s));
  }
}
}  // namespace

void Dropout::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, x[0], ctx.compute, s, "input");
  check_gpu_tensor(*this, y, ctx.compute, s, "output");
  if (!ctx.training || p_ == 0) {
    CHECK_CUDA(cudaMemcpyAsync(y.raw(), x[0].raw(), y.nbytes(), cudaMemcpyDeviceToDevice, ctx.gpu->compute()));
    return;
  }
  apply(ctx, y, x[0], p_, mask_stream(name_, ctx.step), true);
}

void Dropout::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                            std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, dy, ctx.compute, s, "output gradient");
  check_gpu_tensor(*this, dx[0], ctx.compute, s, "input gradient");
  if (!ctx.training || p_ == 0) {
    CHECK_CUDA(cudaMemcpyAsync(dx[0].raw(), dy.raw(), dy.nbytes(), cudaMemcpyDeviceToDevice, ctx.gpu->compute()));
    return;
  }
  apply(ctx, dx[0], dy, p_, mask_stream(name_, ctx.step), false);
}

}  // namespace dp::models
