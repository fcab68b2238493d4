// defines: what maxpool2d and avgpool2d share: their arguments, the setup-time validation of a
// pooling window against a [C, H, W] input, and Pool2dLayer, the base that holds the window and
// checks each batch's tensors and runs the CPU kernels of its kind, so a pooling layer only names its kind.
#pragma once
#include "base/pimpl_ptr.h"
#include "kernels/cpu/onednn_pool.h"
#include "kernels/cpu/pool2d.h"
#include "runtime/layer_registry.h"

namespace dp::models {

// kernel (int, required, >= 1), stride (int, 0 = kernel, >= 0), padding (int, 0, >= 0).
std::vector<ArgSpec> pool2d_arg_specs();

// Validates like torch (padding at most half the kernel, output at least 1x1) and returns the
// dimensions with N = 0 (set per batch). stride 0 means stride = kernel.
kernels::cpu::Pool2dDims setup_pool2d(const Layer& layer, const std::vector<Shape>& in, int64_t kernel, int64_t stride,
                                      int64_t padding);

// Which pooling a Pool2dLayer computes; the GPU path maps it to a cuDNN mode.
enum class PoolKind { Max, Average };

class Pool2dLayer : public Layer {
 public:
  // stride 0: same as kernel.
  Pool2dLayer(std::string name, int64_t kernel, int64_t stride, int64_t padding)
      : Layer(std::move(name)), kernel_(kernel), stride_(stride), padding_(padding) {}
  // Input [C, H, W] -> [C, OH, OW].
  Shape setup(const std::vector<Shape>& in) override;
  virtual PoolKind kind() const = 0;
  bool cpu_channels_last() const override { return true; }
  bool has_onednn_path() const override { return true; }

  // What its backward keeps, per path (pool2d_common_needs.cpp).
  BackwardNeeds backward_needs(const NeedsQuery& q) const override;
 protected:
  // oneDNN where it serves the call, else the reference kernels of kind() (pool2d_common.cpp).
  // Max's backward recomputes the chosen maxima from x (same rule, same result) instead of
  // storing indices.
  DP_LAYER_CPU_PATH();
  // The window's dimensions for a batch of x (N, C, H, W), after checking the other tensors of
  // the call for dtype and shape: forward y (N, C, OH, OW); backward dy, then dx (N, C, H, W).
  kernels::cpu::Pool2dDims forward_dims(const Tensor& x, const Tensor& y) const;
  kernels::cpu::Pool2dDims backward_dims(const Tensor& x, const Tensor& dy, const Tensor& dx) const;
  // The oneDNN path (f32 under CpuBackend::OneDnn; NHWC under ctx.channels_last): true when it
  // served the call; false: the caller runs the reference kernels (which check the layout).
  bool forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y, const kernels::cpu::Pool2dDims& d);
  bool backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx,
                       const kernels::cpu::Pool2dDims& d);
  // cuDNN pooling on ctx.gpu->compute() (pool2d_cuda.cpp): x, y, dy, dx in ctx.compute, NHWC
  // under channels_last. Max: CUDNN_POOLING_MAX_DETERMINISTIC with NaN propagated (as
  // F.max_pool2d); the backward routes dy to the maxima cuDNN finds again from x and y. Average:
  // CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING (count_include_pad=True; floor mode is cuDNN's
  // only mode). dx is overwritten.
  DP_LAYER_CUDA_PATH();

 private:
  int64_t kernel_, stride_, padding_;
  kernels::cpu::Pool2dDims d_{};
  // GPU state (pool2d_cuda.cpp): the pooling descriptor and tensor descriptors per batch shape.
  struct CudaState;
  PimplPtr<CudaState> cuda_;
  std::unique_ptr<kernels::cpu::onednn::OnednnPool> dnnl_;  // made on the first oneDNN call
  kernels::cpu::onednn::OnednnPool& onednn_pool();
  void* planned_workspace(const StepContext& ctx, const kernels::cpu::onednn::PoolGeometry& g);
};

}  // namespace dp::models
