// defines: BatchNorm2d, layer type "batchnorm2d" (PyTorch's nn.BatchNorm2d with affine=True and
// track_running_stats=True; with set_sync(true), nn.SyncBatchNorm), and its registration.
#pragma once
#include "base/pimpl_ptr.h"
#include "runtime/layer_registry.h"

namespace dp::models {

// Which GPU path a BatchNorm2d step takes (batchnorm2d_cuda.cpp). Pure, tested on the host.
enum class BnGpuPath {
  CudnnBatchStats,  // training: cuDNN's forward-training / backward with its saved mean and 1/std
  OwnBatchStats,    // training: our kernels (SyncBN's two-pass global statistics, or cuDNN refused)
  RunningStats,     // eval: cuDNN inference forward (our kernel if refused); our backward kernels
};
// training: ctx.training; synced: SyncBN reduces this step (sync on, a communicator of > 1 rank);
// cudnn_refused: cuDNN answered NOT_SUPPORTED for this layer before.
BnGpuPath bn_gpu_path(bool training, bool synced, bool cudnn_refused);

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
  bool can_fuse_relu() const override { return !sync_; }
  void set_fused_relu(bool on) override { fused_relu_ = on; }

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
  // num_batches_tracked i64 (incremented on the device). Training without SyncBN runs cuDNN's
  // spatial batch norm and keeps its saved mean and 1/std for the backward (recomputed by cuDNN
  // when the backward is not for the last forward's input). SyncBN runs the CPU path's two-pass
  // global statistics with models/layers/batchnorm2d/batchnorm2d_kernels.h and all-reduces device tensors (the compute
  // stream is synchronised before each all-reduce: the communicator's contract); its backward
  // reuses the forward's global statistics, as the CPU path does.
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
  // GPU state (batchnorm2d_cuda.cpp): cuDNN descriptors per batch shape, device statistics and
  // scratch sized once per shape, what the last training forward left for its backward.
  struct CudaState;
  PimplPtr<CudaState> cuda_;
  CudaState& cuda_state(const StepContext& ctx);
  void check_bound_gpu() const;
  // Our kernels' batch statistics of x into the state's mean / 1/std (SyncBN: of all ranks'
  // batches); update_running: also the running statistics. Returns the value count behind them.
  double own_batch_stats(const StepContext& ctx, const Tensor& x, Communicator* comm, bool update_running);

  // The oneDNN side (batchnorm2d_onednn.cpp), for f32 without SyncBN under CpuBackend::OneDnn:
  // primitives per (batch, layout, training, fused ReLU), the last forward's statistics and
  // workspace for its backward.
  struct OnednnState;
  PimplPtr<OnednnState> dnnl_;
  OnednnState& onednn_state();
  void forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y);
  void backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);
};

// momentum (float, 0.1, [0, 1]), eps (float, 1e-5, > 0).
void register_batchnorm2d(LayerRegistry& r);

}  // namespace dp::models
