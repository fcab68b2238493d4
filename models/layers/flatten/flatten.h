// defines: Flatten, layer type "flatten": any per-sample shape -> [product] (row-major, so a
// plain copy), and its registration.
#pragma once
#include "runtime/layer_registry.h"

namespace dp::models {

class Flatten : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "flatten"; }
  Shape setup(const std::vector<Shape>& in) override;
  bool cpu_channels_last() const override { return true; }  // NHWC input: transposed to NCHW order

  // Nothing kept: the backward copies (or transposes) dy.
  BackwardNeeds backward_needs(const NeedsQuery&) const override { return {}; }
 protected:
  DP_LAYER_CPU_PATH();

  // GPU path (flatten_cuda.cpp): a device copy, or for a channels-last 4-D input the NHWC -> NCHW transpose
  // (kernels/cuda/layout.h), so the output is in PyTorch's flatten order; backward the inverse.
  DP_LAYER_CUDA_PATH();

 private:
  Shape in_;
};

// No arguments.
void register_flatten(LayerRegistry& r);

}  // namespace dp::models
