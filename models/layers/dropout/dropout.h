// defines: Dropout, layer type "dropout": inverted dropout (PyTorch's nn.Dropout), and its
// registration.
#pragma once
#include "runtime/layer_registry.h"

namespace dp::models {

class Dropout : public Layer {
 public:
  Dropout(std::string name, double p);
  const char* type() const override { return "dropout"; }
  Shape setup(const std::vector<Shape>& in) override;  // any shape -> same
  // Elementwise: any layout (the mask is drawn per stored element, so an NHWC run drops other
  // elements than an NCHW one, with the same distribution).
  bool cpu_channels_last() const override { return true; }

  // The Philox stream of this layer's mask at `step`: a hash of the layer name mixed with the
  // step. With ctx.seed as the key, the mask is a pure function of (seed, step, layer name), so
  // it is reproducible, differs between layers and steps, and needs no storing for backward.
  static uint64_t mask_stream(const std::string& layer_name, uint64_t step);

  // Nothing kept: the backward redraws the mask from (seed, step, layer) (Philox), on every path.
  BackwardNeeds backward_needs(const NeedsQuery&) const override { return {}; }
 protected:
  // Training: y = x * keep / (1 - p), keep ~ Bernoulli(1 - p); eval: y = x.
  // Recomputes the same mask from ctx (the graph passes the forward's ctx).
  DP_LAYER_CPU_PATH();

  // GPU path (dropout_cuda.cpp): models/layers/dropout/dropout_kernels.h, the CPU mask bit for bit: a channels-last 4-D tensor is
  // masked by its logical NCHW index (the _nhwc kernels), so every layout gets the same mask.
  DP_LAYER_CUDA_PATH();

 private:
  double p_;
  Shape shape_;
};

// p (float, 0.5, [0, 1)).
void register_dropout(LayerRegistry& r);

}  // namespace dp::models
