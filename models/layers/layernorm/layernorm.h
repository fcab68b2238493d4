// defines: LayerNorm, layer type "layernorm": normalisation over the last dimension with a
// learned scale and shift (PyTorch's nn.LayerNorm(C, eps, bias)), and its registration.
#pragma once
#include "base/pimpl_ptr.h"
#include "runtime/layer_registry.h"

namespace dp::models {

class LayerNorm : public Layer {
 public:
  LayerNorm(std::string name, double eps, bool bias);
  const char* type() const override { return "layernorm"; }
  // Input [..., C] (any rank >= 1) -> the same shape; normalised over C.
  Shape setup(const std::vector<Shape>& in) override;
  // "weight" (C) ones, "bias" (C) zeros (absent with bias = false, as nanoGPT's bias flag).
  std::vector<ParamDecl> declare_params() const override;
  bool cpu_channels_last() const override { return true; }  // normalises the last dim of 2-D/3-D tensors
  bool has_onednn_path() const override { return true; }

  // What its backward keeps, per path (layernorm_needs.cpp).
  BackwardNeeds backward_needs(const NeedsQuery& q) const override;
 protected:
  // y = (x - mean) / sqrt(var + eps) * weight + bias, mean and biased var over the last dim.
  // f32 under the oneDNN backend: oneDNN's layer normalization (layernorm_onednn.cpp); otherwise
  // the reference kernels (layernorm_ref.h: f64 sums; the backward recomputes the statistics).
  DP_LAYER_CPU_PATH();

  // GPU path (layernorm_cuda.cpp): layernorm_kernels.h on the compute stream, x and y in
  // ctx.compute, the parameters f32; the backward recomputes the statistics as the CPU's does.
  DP_LAYER_CUDA_PATH();

 private:
  double eps_;
  bool bias_;
  int64_t C_ = 0;
  Shape shape_;

  // The oneDNN side (layernorm_onednn.cpp): primitives per row count, the forward's statistics.
  struct OnednnState;
  PimplPtr<OnednnState> dnnl_;
  OnednnState& onednn_state();
  void forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y);
  void backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);
  // The GPU side: the backward's per-row statistics scratch (layernorm_cuda.cpp).
  struct GpuScratch;
  PimplPtr<GpuScratch> gpu_;
};

// eps (float, 1e-5, > 0), bias (bool, true).
void register_layernorm(LayerRegistry& r);

}  // namespace dp::models
