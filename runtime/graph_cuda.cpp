// Graph's GPU side (runtime/graph.h): what the GPU plan asks of the context (do convolutions fold
// a ReLU: cuDNN's graph API), mixed precision's casts between the fp32 master copies and the layers' 16-bit
// ones, and gradient sums and zeroing on the compute stream.
#include "runtime/graph.h"

#include <cuda_runtime.h>

#include "kernels/cuda/accumulate.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/elementwise.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"

namespace dp {

bool Graph::gpu_convolutions_fuse_relu() const { return gpu_ && gpu_->cudnn_api() == cuda::CudnnApi::Graph; }

const char* Graph::gpu_convolution_api() const {
  return gpu_ && gpu_->cudnn_api() == cuda::CudnnApi::Graph ? "cuDNN's graph API" : "cuDNN's legacy API";
}

void Graph::refresh_compute_params() {
  if (compute_ == DType::F32 || !lp_params_.allocated()) return;
  CHECK_CUDA(kernels::cuda::narrow_from_f32(compute_, lp_params_.flat().raw(),
                                             static_cast<const float*>(params_.flat().raw()), params_.numel(),
                                             gpu_->compute()));
}

void Graph::accumulate_device(const Tensor& dst, const Tensor& src) const {
  const cudaStream_t s = gpu_->compute();
  if (dst.dtype() == DType::F32)
    CHECK_CUDA(kernels::cuda::add_inplace(static_cast<float*>(dst.raw()), static_cast<const float*>(src.raw()),
                                          dst.numel(), s));
  else
    CHECK_CUDA(kernels::cuda::add_inplace_16(static_cast<uint16_t*>(dst.raw()), static_cast<const uint16_t*>(src.raw()),
                                             dst.numel(), dst.dtype() == DType::BF16, s));
}

const Tensor& Graph::output_f32() {
  const Tensor& y = acts_.back();
  ensure_capacity(out32_, y.shape(), DType::F32, device_);
  CHECK_CUDA(kernels::cuda::widen_to_f32(compute_, static_cast<float*>(out32_.raw()), y.raw(), y.numel(),
                                          gpu_->compute()));
  return out32_;
}

const Tensor& Graph::output_grad_in_compute(const Tensor& dy) {
  ensure_capacity(dy16_, dy.shape(), compute_, device_);
  CHECK_CUDA(kernels::cuda::narrow_from_f32(compute_, dy16_.raw(), static_cast<const float*>(dy.raw()), dy.numel(),
                                             gpu_->compute()));
  return dy16_;
}

// The layer accumulated into its 16-bit gradients (zero before it): widen them into the fp32
// master gradients and zero them again for the next micro-batch. A tied parameter's gradient is
// widened by each layer that uses it, after its own backward, so the uses add up in fp32.
void Graph::widen_low_precision_grads(const Node& node) {
  for (int slot : node.bound_slots) {  // tied slots too: this layer's share of a shared gradient
    const Tensor lp = lp_grads_.tensor(slot), g = grads_.tensor(slot);
    CHECK_CUDA(kernels::cuda::widen_accumulate(static_cast<float*>(g.raw()), static_cast<const uint16_t*>(lp.raw()),
                                               g.numel(), compute_ == DType::BF16, gpu_->compute()));
    CHECK_CUDA(cudaMemsetAsync(lp.raw(), 0, lp.nbytes(), gpu_->compute()));
  }
}

void Graph::zero_grad_device() {
  CHECK_CUDA(cudaMemsetAsync(grads_.flat().raw(), 0, grads_.flat().nbytes(), gpu_->compute()));
  if (lp_grads_.allocated())
    CHECK_CUDA(cudaMemsetAsync(lp_grads_.flat().raw(), 0, lp_grads_.flat().nbytes(), gpu_->compute()));
}

void Graph::poison_device_bytes(size_t offset, size_t bytes) {
  CHECK_CUDA(cudaMemsetAsync(static_cast<unsigned char*>(step_arena_.storage()->data()) + offset, 0xFF, bytes,
                             gpu_->compute()));
}

}  // namespace dp
