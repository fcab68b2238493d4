// defines: Gelu, layer type "gelu": the Gaussian error linear unit (PyTorch's nn.GELU), with the
// tanh approximation GPT-2 uses (approximate = "tanh", the default) or the exact erf form
// ("none", nanoGPT's nn.GELU()), and its registration.
#pragma once
#include "base/pimpl_ptr.h"
#include "runtime/layer_registry.h"

namespace dp::models {

class Gelu : public Layer {
 public:
  Gelu(std::string name, bool tanh_approximation);
  const char* type() const override { return "gelu"; }
  Shape setup(const std::vector<Shape>& in) override;  // any shape -> same
  bool cpu_channels_last() const override { return true; }  // elementwise: any layout
  bool has_onednn_path() const override { return true; }
  // The GPU plan may fold a tanh GELU into a linear layer (cuBLASLt's GELU is the tanh one).
  Follower as_follower() const override { return tanh_ ? Follower::TanhGelu : Follower::Other; }

  // Backward reads its input (gelu'(x)), on every path.
  BackwardNeeds backward_needs(const NeedsQuery&) const override { return {.input = true}; }
 protected:
  // f32 under the oneDNN backend: the tanh form on our own vector loops (gelu_tanh_f32.h), the erf
  // form on oneDNN's eltwise gelu_erf forward and backward (gelu_onednn.cpp); otherwise
  // gelu_ref.h. The backward uses x (the layer's input).
  DP_LAYER_CPU_PATH();

  // GPU path (gelu_cuda.cpp): gelu_kernels.h on the compute stream, in ctx.compute (f32, bf16,
  // f16); element-wise, so the same whatever the memory layout.
  DP_LAYER_CUDA_PATH();

 private:
  bool tanh_;
  Shape shape_;
  struct OnednnState;
  PimplPtr<OnednnState> dnnl_;
  OnednnState& onednn_state();
  void forward_onednn(const Tensor& x, Tensor& y);
  void backward_onednn(const Tensor& x, const Tensor& dy, Tensor& dx);
};

// approximate (string, "tanh" | "none"; default "tanh").
void register_gelu(LayerRegistry& r);

}  // namespace dp::models
