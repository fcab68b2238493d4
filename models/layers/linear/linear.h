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
  // pad_out_to: the output's rows are out_features rounded up to a multiple of it (1: unpadded;
  // 0: "auto", resolve_auto_padding's choice, unpadded until it is made). Padding (GPT's LM head:
  // vocabulary 50,257 in rows of 50,304, so that the GEMMs' leading dimension is a multiple of
  // 64): the weight stays (out_features, in), the GEMMs write and read the output and its gradient
  // with leading dimension row_stride(), the padded columns of the output are written 0 and their
  // gradient is never read. Only a bias-free layer that is the model's last (its consumers, the loss
  // and the hit counts, skip the padding: models::output_width) pads, with no epilogue folded in.
  Linear(std::string name, int64_t out_features, bool bias, double init_std = 0.0, std::string tie_weight = "",
         int64_t pad_out_to = 1);
  const char* type() const override { return "linear"; }
  // Input [in_features] -> [out_features], or [T, in_features] -> [T, out_features] (applied to
  // the last dimension, each of the T rows alike, as nn.Linear on a (N, T, C) tensor); padded:
  // [row_stride()] or [T, row_stride()].
  Shape setup(const std::vector<Shape>& in) override;
  // pad_out_to = 0 ("auto", the GPT preset's lm_head): kGpuRowPadding when the model runs on a GPU,
  // 1 on the CPU (whose results stay those of the unpadded layer). Called before setup
  // (models/build.cpp); other values are left as they are.
  void resolve_auto_padding(bool gpu);
  static constexpr int64_t kGpuRowPadding = 64;
  int64_t out_features() const { return out_; }
  int64_t row_stride() const { return ld_out_; }  // the output's last dimension: out_features, or padded
  bool padded() const { return ld_out_ > out_; }  // after setup
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
  // A padded layer takes none.
  EpilogueSet applicable_epilogues(FusionPath path) const override {
    if (padded()) return {};
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
  int64_t pad_out_to_;   // 0: auto, unresolved (unpadded)
  int64_t ld_out_ = 0;   // the output's row stride (setup): out_ rounded up to pad_out_to_
  bool bias_;
  double init_std_;
  std::string tie_weight_;
  Shape in_shape_, out_shape_;  // per sample: [in] or [T, in], and [ld_out] or [T, ld_out]
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

// out_features rounded up to a multiple of pad_out_to (>= 1): the padded row stride.
constexpr int64_t padded_row_stride(int64_t out_features, int64_t pad_out_to) {
  return (out_features + pad_out_to - 1) / pad_out_to * pad_out_to;
}

// out_features (int, required, >= 1), bias (bool, true), init_std (float, 0: PyTorch's default),
// tie_weight (string, "": a parameter's full name), pad_out_to (int, 1; 0: "auto", 64 on a GPU).
void register_linear(LayerRegistry& r);

}  // namespace dp::models
