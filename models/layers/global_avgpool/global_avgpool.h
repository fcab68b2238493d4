// defines: GlobalAvgPool, layer type "global_avgpool": [C, H, W] -> [C, 1, 1] plane means
// (PyTorch's nn.AdaptiveAvgPool2d(1)), and its registration.
#pragma once
#include "runtime/layer_registry.h"

namespace dp::models {

class GlobalAvgPool : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "global_avgpool"; }
  Shape setup(const std::vector<Shape>& in) override;

 protected:
  DP_LAYER_CPU_PATH();
  // models/layers/global_avgpool/global_avgpool_kernels.h on ctx.gpu->compute(): x and dx in ctx.compute, NHWC under
  // channels_last; y and dy [N, C, 1, 1], the same memory in either layout. dx is overwritten.
  DP_LAYER_CUDA_PATH();

 private:
  int64_t C_ = 0, H_ = 0, W_ = 0;
};

// No arguments.
void register_global_avgpool(LayerRegistry& r);

}  // namespace dp::models
