// LayerNorm's GPU path: models/layers/layernorm/layernorm_kernels.h on the compute stream; x, y,
// dy and dx in ctx.compute, the parameters and their gradients f32.
#include "models/layers/common.h"
#include "models/layers/layernorm/layernorm.h"
#include "models/layers/layernorm/layernorm_kernels.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"

namespace dp::models {

// The backward's scratch (each row's statistics, the parameter sums' partials), grown to the
// largest size seen.
struct LayerNorm::GpuScratch {
  cudaStream_t stream = nullptr;
  int64_t floats = 0;
  cuda::DeviceBuffer stats;
};

void LayerNorm::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, x[0], ctx.compute, s, "input");
  check_gpu_tensor(*this, y, ctx.compute, s, "output");
  check_gpu_tensor(*this, params_.at(0), DType::F32, {C_}, "weight");
  if (bias_) check_gpu_tensor(*this, params_.at(1), DType::F32, {C_}, "bias");
  CHECK_CUDA(kernels::cuda::layernorm_forward(ctx.compute, y.raw(), x[0].raw(), params_[0].data<float>(),
                                              bias_ ? params_[1].data<float>() : nullptr, x[0].numel() / C_, C_,
                                              static_cast<float>(eps_), ctx.gpu->compute()));
}

void LayerNorm::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                              std::vector<Tensor>& dx) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const Shape s = with_batch(x[0].dim(0), shape_);
  check_gpu_tensor(*this, x[0], ctx.compute, s, "input");
  check_gpu_tensor(*this, dy, ctx.compute, s, "output gradient");
  if (dx[0].defined()) check_gpu_tensor(*this, dx[0], ctx.compute, s, "input gradient");
  check_gpu_tensor(*this, grads_.at(0), DType::F32, {C_}, "weight gradient");
  if (bias_) check_gpu_tensor(*this, grads_.at(1), DType::F32, {C_}, "bias gradient");
  const cudaStream_t stream = ctx.gpu->compute();
  const int64_t rows = x[0].numel() / C_;
  if (!gpu_) gpu_.emplace();
  GpuScratch& g = *gpu_;
  const int64_t floats = kernels::cuda::layernorm_backward_scratch_floats(rows, C_);
  if (g.floats < floats || g.stream != stream) {
    g.stats = cuda::DeviceBuffer();  // freed in the old stream's order
    g.stats = cuda::DeviceBuffer(static_cast<size_t>(floats) * sizeof(float), stream);
    g.floats = floats, g.stream = stream;
  }
  CHECK_CUDA(kernels::cuda::layernorm_backward(ctx.compute, dx[0].defined() ? dx[0].raw() : nullptr,
                                               grads_[0].data<float>(), bias_ ? grads_[1].data<float>() : nullptr,
                                               dy.raw(), x[0].raw(), params_[0].data<float>(), rows, C_,
                                               static_cast<float>(eps_), g.stats.as<float>(), stream));
}

}  // namespace dp::models
