// defines: BatchNorm2d, layer type "batchnorm2d" (PyTorch's nn.BatchNorm2d with affine=True and
// track_running_stats=True; with set_sync(true), nn.SyncBatchNorm), and its registration.
#pragma once
#include "base/pimpl_ptr.h"
#include "runtime/bn_impl.h"
#include "runtime/layer_registry.h"

namespace dp::models {

// Which GPU path a BatchNorm2d training or eval step takes (batchnorm2d_cuda.cpp). Pure, tested
// on the host.
enum class BnGpuPath {
  CudnnEx,       // training: cuDNN's persistent NHWC batch norm, the epilogue through its bnOps
  Cudnn,         // training: cuDNN's legacy spatial batch norm (saved mean and 1/std kept)
  Own,           // training: our one-pass kernels (batchnorm2d_reduce.h, batchnorm2d_apply.h)
  OwnSync,       // training under SyncBN: our f64 two-pass global statistics (batchnorm2d_kernels.h)
  RunningStats,  // eval: running statistics (cuDNN's inference call, or ours under bn_impl own)
};
// training: ctx.training; synced: SyncBN reduces this step (sync on, a communicator of > 1 rank);
// impl: train.bn_impl; ex_allowed: cuDNN's persistent batch norm may run this layer (its guard,
// batchnorm2d_ex_guard.h, and no refusal before); cudnn_refused: cuDNN's legacy call answered
// NOT_SUPPORTED for this layer before.
BnGpuPath bn_gpu_path(bool training, bool synced, BnImpl impl, bool ex_allowed, bool cudnn_refused);

struct BnCudaState;  // batchnorm2d_gpu.h

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(std::string name, double momentum, double eps);
  const char* type() const override { return "batchnorm2d"; }
  // Input [C, H, W] -> same.
  Shape setup(const std::vector<Shape>& in) override;
  // Torch's state_dict order: "weight" (C) = 1, "bias" (C) = 0, then the buffers
  // "running_mean" (C) = 0, "running_var" (C) = 1, "num_batches_tracked" (i64 scalar) = 0.
  std::vector<ParamDecl> declare_params() const override;
  // SyncBN (model.sync_bn): in training the batch statistics, and the sums their gradient needs,
  // are all-reduced over ctx.comm's ranks, so every rank normalises with the statistics of the
  // global batch, as one process over all ranks' samples would. Weight and bias gradients stay
  // local (the gradient all-reduce averages them). No effect without ctx.comm or with one rank.
  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }
  // SyncBN stays on the reference path (NCHW, unfused): its statistics are all-reduced there.
  bool cpu_channels_last() const override { return !sync_; }
  bool has_onednn_path() const override { return true; }
  // CPU: oneDNN's fused ReLU (not SyncBN, which stays on the reference path). GPU: every path
  // applies a ReLU, or a residual add and a ReLU (SyncBN included): on its own output in forward,
  // on dy (g = dy * (y > 0), the residual's gradient g) before its backward.
  EpilogueSet applicable_epilogues(FusionPath path) const override {
    if (path == FusionPath::CpuOnednn) return sync_ ? EpilogueSet{} : EpilogueSet{Epilogue::Relu};
    return {Epilogue::Relu, Epilogue::AddRelu};
  }
  // GPU: the implementation that trains (train.bn_impl; runtime/bn_impl.h). Default Cudnn.
  void set_gpu_impl(BnImpl impl) { impl_ = impl; }

  // What its backward keeps, per path (batchnorm2d_needs.cpp).
  BackwardNeeds backward_needs(const NeedsQuery& q) const override;
 protected:
  // Training (ctx.training): normalise with the batch statistics (biased variance) and update
  // the running ones (momentum, unbiased variance) exactly as torch does; eval: running stats.
  // Plain BN recomputes the batch statistics from x rather than caching them: the layer keeps no
  // state between forward and backward, so a backward can never see another batch's statistics.
  // SyncBN keeps its forward's global statistics instead (recomputing them would cost two more
  // collectives per layer and step) and checks that the backward is for that forward's input.
  DP_LAYER_CPU_PATH();
  // The same semantics on ctx.gpu->compute(): x, y, dy, dx in ctx.compute (NHWC under
  // channels_last); weight, bias, their gradients and the running statistics f32,
  // num_batches_tracked i64 (incremented on the device). With an epilogue (Layer::epilogue) y is
  // relu(bn(x) [+ x[1]]) and dx[1] the residual's gradient. Training
  // without SyncBN runs train.bn_impl (bn_gpu_path): cuDNN's legacy spatial batch norm, our
  // one-pass kernels, or cuDNN's persistent NHWC batch norm; each keeps its statistics for the
  // backward of the same input (a backward of another input recomputes them with our kernels).
  // SyncBN runs the CPU path's two-pass global statistics with batchnorm2d_kernels.h and
  // all-reduces device tensors (the compute stream is synchronised before each all-reduce: the
  // communicator's contract); its backward reuses the forward's global statistics, as the CPU
  // path does. Eval normalises with the running statistics.
  DP_LAYER_CUDA_PATH();

 private:
  void check_bound(DType dtype) const;
  // mean and 1/sqrt(var + eps) (C): of the batch in training, of the running stats otherwise.
  // Values per channel behind the statistics: this batch's, or all ranks' batches' (SyncBN).
  void statistics(const StepContext& ctx, const Tensor& x, std::vector<double>& mean, std::vector<double>& invstd,
                  std::vector<double>* batch_var, double* count) const;
  Communicator* sync_comm(const StepContext& ctx) const;
  double momentum_, eps_;
  bool sync_ = false;
  // SyncBN: the last training forward's global statistics and the input they belong to.
  struct SyncStats {
    const void* x = nullptr;
    Shape shape;
    uint64_t step = 0;
    std::vector<double> mean, invstd;
    double count = 0;
  } sync_stats_;
  int64_t C_ = 0, H_ = 0, W_ = 0;
  BnImpl impl_ = BnImpl::Cudnn;
  // GPU state (batchnorm2d_gpu.h): cuDNN descriptors per batch shape, device statistics and
  // scratch sized once per shape, what the last training forward left for its backward.
  PimplPtr<BnCudaState> cuda_;
  BnCudaState& cuda_state(const StepContext& ctx);
  void check_bound_gpu() const;
  // SyncBN's global batch statistics of x (f64, two passes, all-reduced through comm) into the
  // state's mean / 1/std, and the running statistics updated. Returns the value count behind them.
  double sync_batch_stats(const StepContext& ctx, const Tensor& x, Communicator* comm);

  // The oneDNN side (batchnorm2d_onednn.cpp), for f32 without SyncBN under CpuBackend::OneDnn:
  // primitives per (batch, layout, training, fused ReLU), the last forward's statistics and
  // workspace for its backward.
  struct OnednnState;
  PimplPtr<OnednnState> dnnl_;
  OnednnState& onednn_state();
  void forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y);
  // The fused ReLU's workspace for a batch of N in that layout as oneDNN sizes it (its primitive
  // descriptor): for backward_needs.
  size_t onednn_relu_workspace_bytes(int64_t N, bool nhwc) const;
  void backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);
};

// momentum (float, 0.1, [0, 1]), eps (float, 1e-5, > 0).
void register_batchnorm2d(LayerRegistry& r);

}  // namespace dp::models
