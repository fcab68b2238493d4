// defines: ReLU, layer type "relu": y = max(x, 0), and its registration.
#pragma once
#include "runtime/layer_registry.h"

namespace dp::models {

class ReLU : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "relu"; }
  Shape setup(const std::vector<Shape>& in) override;  // any shape -> same

 protected:
  void forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) override;
  // Uses y (y > 0 <=> x > 0), as torch's threshold_backward does.
  void backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                    std::vector<Tensor>& dx) override;

  // GPU path (relu_cuda.cpp): kernels/cuda/elementwise.h, elementwise whatever the layout.
  DP_LAYER_CUDA_PATH();

 private:
  Shape shape_;
};

// No arguments.
void register_relu(LayerRegistry& r);

}  // namespace dp::models
