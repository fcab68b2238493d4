// defines: CausalSelfAttention, layer type "causal_self_attention": GPT-2's multi-head causal
// self-attention with its projections (nanoGPT's CausalSelfAttention: the fused QKV projection
// attn.c_attn, scaled dot-product attention with a causal mask and attention dropout, the output
// projection attn.c_proj and the residual dropout), and its registration.
#pragma once
#include "base/pimpl_ptr.h"
#include "models/layers/attention/attention_gpu_core.h"
#include "runtime/layer_registry.h"

namespace dp::models {

struct AttentionSaved;  // attention_saved.h: the forward's qkv, probabilities and heads' output

class CausalSelfAttention : public Layer {
 public:
  struct Options {
    int64_t n_head = 1;
    bool bias = true;
    double dropout = 0;        // on the attention probabilities (training only)
    double resid_dropout = 0;  // on the output (training only)
    double init_std = 0.02;       // c_attn.weight ~ N(0, init_std^2); biases 0
    double proj_init_std = 0.02;  // c_proj.weight (nanoGPT: 0.02 / sqrt(2 n_layer))
    SdpaPreference sdpa = SdpaPreference::Auto;  // the GPU's attention core (attention_gpu_core.h)
  };
  CausalSelfAttention(std::string name, const Options& o);
  const char* type() const override { return "causal_self_attention"; }
  // Input [T, C] (C divisible by n_head) -> [T, C].
  Shape setup(const std::vector<Shape>& in) override;
  // "c_attn.weight" (3C, C), "c_attn.bias" (3C), "c_proj.weight" (C, C), "c_proj.bias" (C):
  // nn.Linear layouts; q, k, v are c_attn's output rows [0, C), [C, 2C), [2C, 3C), head h the
  // columns [h D, (h+1) D) of each (D = C / n_head), as nanoGPT splits and views them.
  std::vector<ParamDecl> declare_params() const override;
  bool cpu_channels_last() const override { return true; }  // no 4-D activations: no layout
  bool has_onednn_path() const override { return true; }
  // The projections run in the compute dtype on the GPU (cuBLASLt), as Linear's.
  bool low_precision_params() const override { return true; }

  // The masks' Philox streams at `step` (Dropout::mask_stream of "<name>.attn_dropout" and
  // "<name>.resid_dropout"): element (n, h, i, j) of the attention probabilities is dropped by
  // its logical index ((n H + h) T + i) T + j, the same on both CPU paths.
  uint64_t attn_stream(uint64_t step) const;
  uint64_t resid_stream(uint64_t step) const;

  // What its backward keeps, per path (attention_needs.cpp).
  BackwardNeeds backward_needs(const NeedsQuery& q) const override;
 protected:
  // qkv = x Wa^T + ba; per head y_h = dropout(softmax(q_h k_h^T / sqrt(D) + causal mask)) v_h;
  // out = dropout(concat_h(y_h) Wp^T + bp). The backward uses qkv, the probabilities and the
  // heads' output kept by the forward of the same input (recomputed for another).
  //   f32 under the oneDNN backend (attention_onednn.cpp): oneDNN matmuls for the projections, the
  //   core on FlashAttention's tiles on or below the diagonal (flash_core.h: online softmax, the
  //   probabilities kept); otherwise the reference kernels (linear_ref.h, attention_ref.h).
  DP_LAYER_CPU_PATH();

  // GPU path (attention_cuda.cpp), x, y, the projections' parameters and gradients in ctx.compute:
  // the projections on cuBLASLt (models/layers/linear/lt_matmul.h, the biases as epilogues), the
  // core on cuDNN's fused attention or the own kernel (attention_gpu_core.h chooses; under 16-bit
  // data the own kernel runs on f32 copies), the residual dropout on dropout_kernels.h. The forward
  // keeps qkv, the heads' output and the core's softmax record (cuDNN: the rows' log-sum-exp; own:
  // the probabilities, f32) for the backward of the same input.
  DP_LAYER_CUDA_PATH();

 private:
  using Saved = AttentionSaved;
  void check_io(const Tensor& x, const Tensor& y, const char* what) const;
  void forward_ref(const StepContext& ctx, const Tensor& x, Tensor* y);
  void backward_ref(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);
  bool saved_for(const StepContext& ctx, const Tensor& x, bool onednn) const;

  Options o_;
  int64_t T_ = 0, C_ = 0, D_ = 0;
  PimplPtr<Saved> saved_;
  Saved& saved();

  struct OnednnState;  // attention_onednn.cpp: the projections' matmuls
  PimplPtr<OnednnState> dnnl_;
  OnednnState& onednn_state();
  void forward_onednn(const StepContext& ctx, const Tensor& x, Tensor* y);
  void backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);

  struct CudaState;  // attention_cuda.cpp: what the GPU forward keeps, the backward's buffers
  PimplPtr<CudaState> cuda_;
  void forward_gpu(const StepContext& ctx, const Tensor& x, Tensor* y);
  void core_forward_gpu(const StepContext& ctx);
  void core_backward_gpu(const StepContext& ctx);
};

// n_head (int, required, >= 1), bias (bool, true), dropout (float, 0), resid_dropout (float, 0),
// init_std (float, 0.02), proj_init_std (float, 0.02), sdpa (string, "auto" or "own").
void register_causal_self_attention(LayerRegistry& r);

}  // namespace dp::models
