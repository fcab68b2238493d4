// Flatten's GPU path. The output [N, C H W] is in PyTorch's flatten order (NCHW), which a
// linear layer after it relies on: from NCHW memory (or any input of another rank) that is a
// device copy; from a channels-last 4-D input it is the NHWC -> NCHW transpose
// (kernels/cuda/layout.h). Backward is the inverse: a copy, or NCHW -> NHWC.
#include "models/layers/flatten/flatten.h"

#include "kernels/cuda/layout.h"
#include "models/layers/common.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"

namespace dp::models {

void Flatten::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const int64_t N = x[0].dim(0);
  const DType dt = x[0].dtype();
  check_gpu_tensor(*this, x[0], dt, with_batch(N, in_), "input");
  check_gpu_tensor(*this, y, dt, {N, shape_numel(in_)}, "output");
  cudaStream_t s = ctx.gpu->compute();
  if (is_channels_last(ctx, x[0]))
    CHECK_CUDA(kernels::cuda::nhwc_to_nchw(dt, y.raw(), x[0].raw(), N, x[0].dim(1), x[0].dim(2), x[0].dim(3), s));
  else
    CHECK_CUDA(cudaMemcpyAsync(y.raw(), x[0].raw(), y.nbytes(), cudaMemcpyDeviceToDevice, s));
}

void Flatten::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                            std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const int64_t N = x[0].dim(0);
  const DType dt = x[0].dtype();
  check_gpu_tensor(*this, dy, dt, {N, shape_numel(in_)}, "output gradient");
  check_gpu_tensor(*this, dx[0], dt, with_batch(N, in_), "input gradient");
  cudaStream_t s = ctx.gpu->compute();
  if (is_channels_last(ctx, dx[0]))
    CHECK_CUDA(kernels::cuda::nchw_to_nhwc(dt, dx[0].raw(), dy.raw(), N, dx[0].dim(1), dx[0].dim(2), dx[0].dim(3), s));
  else
    CHECK_CUDA(cudaMemcpyAsync(dx[0].raw(), dy.raw(), dy.nbytes(), cudaMemcpyDeviceToDevice, s));
}

}  // namespace dp::models
