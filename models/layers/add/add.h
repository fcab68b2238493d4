// defines: Add, layer type "add": the sum of two inputs of identical shape (residual joins),
// and its registration.
#pragma once
#include "runtime/layer_registry.h"

namespace dp::models {

class Add : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "add"; }
  int num_inputs() const override { return 2; }
  Shape setup(const std::vector<Shape>& in) override;
  // Layout-free: NHWC on the CPU as well. Under the oneDNN backend the graph may fold a following
  // relu in (add_relu forward; the backward masks dy by the output once for both inputs).
  bool cpu_channels_last() const override { return true; }
  EpilogueSet applicable_epilogues(FusionPath path) const override {
    return path == FusionPath::CpuOnednn ? EpilogueSet{Epilogue::Relu} : EpilogueSet{};
  }
  // The GPU plan may fold it, with the relu after it, into a batch norm feeding it
  // (runtime/fusion_plan.h).
  Follower as_follower() const override { return Follower::Add; }

  // Backward copies dy: nothing kept; with a folded relu (the CPU plan) it masks by its output.
  BackwardNeeds backward_needs(const NeedsQuery& q) const override { return {.output = q.epilogue == Epilogue::Relu}; }
 protected:
  // Both inputs receive dy (where their gradient is wanted).
  DP_LAYER_CPU_PATH();

  // GPU path (add_cuda.cpp): kernels/cuda/elementwise.h forward; each wanted input gradient is a device copy of dy.
  DP_LAYER_CUDA_PATH();

 private:
  Shape shape_;
};

// No arguments; the layer's `inputs` list names the two joined layers.
void register_add(LayerRegistry& r);

}  // namespace dp::models
