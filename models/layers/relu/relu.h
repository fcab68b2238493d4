// defines: ReLU, layer type "relu": y = max(x, 0), and its registration.
#pragma once
#include "runtime/layer_registry.h"

namespace dp::models {

class ReLU : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "relu"; }
  Shape setup(const std::vector<Shape>& in) override;  // any shape -> same
  bool cpu_channels_last() const override { return true; }  // elementwise: any layout
  Follower as_follower() const override { return Follower::Relu; }  // the plan may fold it

  // Backward reads its output only (dx = dy * (y > 0)), on every path.
  BackwardNeeds backward_needs(const NeedsQuery&) const override { return {.output = true}; }
 protected:
  // Uses y (y > 0 <=> x > 0), as torch's threshold_backward does.
  DP_LAYER_CPU_PATH();

  // GPU path (relu_cuda.cpp): kernels/cuda/elementwise.h, elementwise whatever the layout.
  DP_LAYER_CUDA_PATH();

 private:
  Shape shape_;
};

// No arguments.
void register_relu(LayerRegistry& r);

}  // namespace dp::models
