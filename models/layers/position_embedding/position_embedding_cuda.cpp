// PositionEmbedding's GPU path: models/layers/position_embedding/position_embedding_kernels.h on
// the compute stream; x, y, dy and dx in ctx.compute, the table and its gradient f32.
#include <cuda_runtime_api.h>

#include "models/layers/common.h"
#include "models/layers/position_embedding/position_embedding.h"
#include "models/layers/position_embedding/position_embedding_kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"

namespace dp::models {

void PositionEmbedding::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const int64_t N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], ctx.compute, {N, T_, dim_}, "input");
  check_gpu_tensor(*this, y, ctx.compute, {N, T_, dim_}, "output");
  check_gpu_tensor(*this, params_.at(0), DType::F32, {num_, dim_}, "weight");
  CHECK_CUDA(kernels::cuda::position_embedding_forward(ctx.compute, y.raw(), x[0].raw(), params_[0].data<float>(), N,
                                                       T_, dim_, ctx.gpu->compute()));
}

void PositionEmbedding::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&,
                                      const Tensor& dy, std::vector<Tensor>& dx) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const int64_t N = x[0].dim(0);
  const cudaStream_t stream = ctx.gpu->compute();
  check_gpu_tensor(*this, dy, ctx.compute, {N, T_, dim_}, "output gradient");
  check_gpu_tensor(*this, grads_.at(0), DType::F32, {num_, dim_}, "weight gradient");
  if (dx[0].defined()) {
    check_gpu_tensor(*this, dx[0], ctx.compute, {N, T_, dim_}, "input gradient");
    CHECK_CUDA(cudaMemcpyAsync(dx[0].raw(), dy.raw(), dy.nbytes(), cudaMemcpyDeviceToDevice, stream));
  }
  CHECK_CUDA(kernels::cuda::position_embedding_backward(ctx.compute, grads_[0].data<float>(), dy.raw(), N, T_, dim_,
                                                        stream));
}

}  // namespace dp::models
