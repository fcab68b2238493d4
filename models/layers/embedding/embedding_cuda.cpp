// Embedding's GPU path: models/layers/embedding/embedding_kernels.h on the compute stream; ids i32
// on the device, y and dy in ctx.compute, the table and its gradient f32.
#include "models/layers/common.h"
#include "models/layers/embedding/embedding.h"
#include "models/layers/embedding/embedding_kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"

namespace dp::models {

void Embedding::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const int64_t N = x[0].dim(0);
  Shape out = with_batch(N, in_);
  out.push_back(dim_);
  check_gpu_tensor(*this, x[0], DType::I32, with_batch(N, in_), "input ids");
  check_gpu_tensor(*this, y, ctx.compute, out, "output");
  check_gpu_tensor(*this, params_.at(0), DType::F32, {num_, dim_}, "weight");
  CHECK_CUDA(kernels::cuda::embedding_forward(ctx.compute, y.raw(), x[0].data<int32_t>(), params_[0].data<float>(),
                                              x[0].numel(), num_, dim_, ctx.gpu->compute()));
}

void Embedding::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                              std::vector<Tensor>& dx) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  DP_CHECK(!dx[0].defined(), "{}: ids have no gradient, but one was asked for", layer_str(*this));
  check_gpu_tensor(*this, x[0], DType::I32, with_batch(x[0].dim(0), in_), "input ids");
  check_gpu_tensor(*this, dy, ctx.compute, y.shape(), "output gradient");
  check_gpu_tensor(*this, grads_.at(0), DType::F32, {num_, dim_}, "weight gradient");
  CHECK_CUDA(kernels::cuda::embedding_backward(ctx.compute, grads_[0].data<float>(), x[0].data<int32_t>(), dy.raw(),
                                               x[0].numel(), num_, dim_, ctx.gpu->compute()));
}

}  // namespace dp::models
