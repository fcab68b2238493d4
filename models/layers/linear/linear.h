// defines: Linear, layer type "linear": y = x W^T + b (PyTorch's nn.Linear), and its registration.
#pragma once
#include "base/pimpl_ptr.h"
#include "runtime/layer_registry.h"

namespace dp::models {

class Linear : public Layer {
 public:
  // init_std > 0: weight N(0, init_std^2) and bias 0 (GPT's init); 0: PyTorch's default (below).
  // tie_weight: the full name of an earlier layer's parameter this layer's weight is (GPT's LM
  // head on "transformer.wte.weight"; ParamDecl::tied_to), or "".
  Linear(std::string name, int64_t out_features, bool bias, double init_std = 0.0, std::string tie_weight = "");
  const char* type() const override { return "linear"; }
  // Input [in_features] -> [out_features], or [T, in_features] -> [T, out_features] (applied to
  // the last dimension, each of the T rows alike, as nn.Linear on a (N, T, C) tensor).
  Shape setup(const std::vector<Shape>& in) override;
  // "weight" (out, in), "bias" (out): U(-1/sqrt(in), 1/sqrt(in)), PyTorch's default; a tied weight
  // is its owner's (initialised there).
  std::vector<ParamDecl> declare_params() const override;
  // Under mixed precision the weight, bias and their gradients are in the compute dtype.
  bool low_precision_params() const override { return true; }
  bool cpu_channels_last() const override { return true; }  // 2-D and 3-D activations: no layout
  bool has_onednn_path() const override { return true; }
  // CPU: oneDNN's ReLU post-op. GPU: Epilogue::Gelu (train.gpu_fusion; GPT's c_fc -> gelu),
  // cuBLASLt's GELU_AUX epilogue applies a tanh GELU to the output and keeps its input
  // (gelu_pre_) for the backward.
  EpilogueSet applicable_epilogues(FusionPath path) const override {
    return path == FusionPath::CpuOnednn ? EpilogueSet{Epilogue::Relu} : EpilogueSet{Epilogue::Gelu};
  }

  // What its backward keeps, per path (linear_needs.cpp).
  BackwardNeeds backward_needs(const NeedsQuery& q) const override;
 protected:
  DP_LAYER_CPU_PATH();

  // GPU path (linear_cuda.cpp): one cuBLASLt matmul with the bias epilogue forward; dx = dy W, dW += dy^T x
  // (cuBLASLt, beta 1) and db += column sums of dy (kernels/cuda/elementwise.h bias_grad). With
  // a folded GELU: the GELU in the matmul's epilogue, and the backward first turns gelu_pre_ into
  // g = dy * gelu'(pre) in place, then runs on g.
  DP_LAYER_CUDA_PATH();

 private:
  void check_params(DType dtype) const;
  int64_t rows(const Tensor& x) const { return x.numel() / in_; }  // samples x positions
  int64_t in_ = 0, out_;
  bool bias_;
  double init_std_;
  std::string tie_weight_;
  Shape in_shape_, out_shape_;  // per sample: [in] or [T, in], and [out] or [T, out]
  // Epilogue::Gelu: the GELU's input (M, out) in the compute dtype, written by forward and used up
  // (turned into the gradient) by the backward after it (gelu_pre_fresh_ between the two).
  Tensor gelu_pre_;
  bool gelu_pre_fresh_ = false;

  // The oneDNN side (linear_onednn.cpp), for f32 under CpuBackend::OneDnn: the matmul primitives
  // (kernels/cpu/onednn_matmul.h) and the masked dy of a fused ReLU, made on first use.
  struct OnednnState;
  PimplPtr<OnednnState> dnnl_;
  OnednnState& onednn_state();
  void forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y);
  void backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx);
};

// out_features (int, required, >= 1), bias (bool, true), init_std (float, 0: PyTorch's default),
// tie_weight (string, "": a parameter's full name).
void register_linear(LayerRegistry& r);

}  // namespace dp::models
