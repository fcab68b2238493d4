// defines: GlobalAvgPool, layer type "global_avgpool": [C, H, W] -> [C, 1, 1] plane means
// (PyTorch's nn.AdaptiveAvgPool2d(1)), and its registration.
#pragma once
#include <memory>

#include "kernels/cpu/onednn_pool.h"
#include "runtime/layer_registry.h"

namespace dp::models {

class GlobalAvgPool : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "global_avgpool"; }
  Shape setup(const std::vector<Shape>& in) override;
  bool cpu_channels_last() const override { return true; }
  bool has_onednn_path() const override { return true; }

  // Nothing kept: dx = dy / (H W) spread over the plane (the input's shape only).
  BackwardNeeds backward_needs(const NeedsQuery&) const override { return {}; }
 protected:
  DP_LAYER_CPU_PATH();
  // models/layers/global_avgpool/global_avgpool_kernels.h on ctx.gpu->compute(): x and dx in ctx.compute, NHWC under
  // channels_last; y and dy [N, C, 1, 1], the same memory in either layout. dx is overwritten.
  DP_LAYER_CUDA_PATH();

 private:
  int64_t C_ = 0, H_ = 0, W_ = 0;
  // The oneDNN path (global_avgpool_onednn.cpp): an H x W average pooling, NCHW or NHWC.
  std::unique_ptr<kernels::cpu::onednn::OnednnPool> dnnl_;
  bool forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y);
  bool backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);
};

// No arguments.
void register_global_avgpool(LayerRegistry& r);

}  // namespace dp::models
