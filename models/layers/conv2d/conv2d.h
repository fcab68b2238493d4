// defines: Conv2d, layer type "conv2d": grouped 2-D convolution (PyTorch's nn.Conv2d, square
// kernel, NCHW), and its registration. CPU path: conv2d.cpp (models/layers/conv2d/conv2d_ref.h); CUDA path:
// conv2d_cuda.cpp (cuDNN's legacy API) and conv2d_graph_cuda.cpp (cuDNN's graph API), chosen by
// train.cudnn_api (cuda::ExecContext::cudnn_api).
#pragma once
#include "base/pimpl_ptr.h"
#include "models/layers/conv2d/conv2d_ref.h"
#include "runtime/layer_registry.h"

namespace dp::models {

struct Conv2dArgs {
  int64_t out_channels = 1, kernel = 1, stride = 1, padding = 0, groups = 1;
  bool bias = true;
  // "default": PyTorch's U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
  // "kaiming_normal_fan_out": torchvision ResNet's N(0, 2/fan_out) weight, zero bias.
  std::string init = "default";
};

class Conv2d : public Layer {
 public:
  Conv2d(std::string name, Conv2dArgs args);
  const char* type() const override { return "conv2d"; }
  // Input [C, H, W] -> [out_channels, OH, OW].
  Shape setup(const std::vector<Shape>& in) override;
  // "weight" (out_channels, C/groups, kernel, kernel), "bias" (out_channels).
  std::vector<ParamDecl> declare_params() const override;
  // On the GPU, weight and bias (and their gradients) come in the step's compute dtype.
  bool low_precision_params() const override { return true; }
  bool cpu_channels_last() const override { return true; }
  bool has_onednn_path() const override { return true; }
  // A following ReLU: oneDNN's post-op on the CPU; on the GPU the forward's fused epilogue under
  // cuDNN's graph API, which is where the plan folds one (either CUDA path applies an
  // Epilogue::Relu, though, and masks the output gradient by it).
  EpilogueSet applicable_epilogues(FusionPath path) const override {
    return path == FusionPath::Gpu ? EpilogueSet{} : EpilogueSet{Epilogue::Relu};
  }

  // What its backward keeps, per path (conv2d_needs.cpp).
  BackwardNeeds backward_needs(const NeedsQuery& q) const override;
 protected:
  DP_LAYER_CPU_PATH();
  // cuDNN: forward, backward data (into dx when defined), backward filter and bias accumulated
  // (+=) into the gradients; NCHW, or NHWC activations under ctx.channels_last. The graph API
  // (conv2d_graph_cuda.cpp) when the context asks for it and cuDNN has plans for the layer's
  // shapes, else the legacy API (conv2d_cuda.cpp).
  DP_LAYER_CUDA_PATH();

 private:
  kernels::cpu::Conv2dDims dims(int64_t batch) const;
  void check_params(DType dtype) const;
  Conv2dArgs a_;
  int64_t C_ = 0, H_ = 0, W_ = 0, OH_ = 0, OW_ = 0;

  // The cuDNN side (conv2d_cuda.cpp), made by the first CUDA step: descriptors for the last batch
  // size, chosen algorithms, the KRSC weight copy and gradient scratch of channels-last mode.
  struct CudaState;
  CudaState& cuda_state(const StepContext& ctx, DType dtype, int64_t batch);
  // check_params' GPU twin: weight and bias (and with `grads` their gradients) `dtype` on `dev`.
  void check_params_cuda(DType dtype, Device dev, bool grads) const;
  PimplPtr<CudaState> cuda_;

  // The graph-API side (conv2d_graph_cuda.cpp): the chosen plans per batch size, the KRSC weight
  // copy and filter-gradient scratch they need, and whether this layer fell back to the legacy
  // API. forward_graph / backward_graph return false when it did (nothing was computed).
  struct GraphState;
  PimplPtr<GraphState> graph_;
  GraphState& graph_state(const StepContext& ctx, int64_t batch);
  bool uses_graph_api(const StepContext& ctx) const;
  bool forward_graph(const StepContext& ctx, const Tensor& x, Tensor& y);
  bool backward_graph(const StepContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx);

  // The oneDNN side (conv2d_onednn.cpp), taken for f32 under CpuBackend::OneDnn: primitives,
  // scratchpads and blocked weight copies per (batch, layout, fused ReLU), made on first use.
  struct OnednnState;
  PimplPtr<OnednnState> dnnl_;
  OnednnState& onednn_state();
  void forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y);
  void backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx);
};

// out_channels (int, required, >= 1), kernel (int, required, >= 1), stride (int, 1, >= 1),
// padding (int, 0, >= 0), groups (int, 1, >= 1), bias (bool, true),
// init (string, "default" | "kaiming_normal_fan_out").
void register_conv2d(LayerRegistry& r);

}  // namespace dp::models
