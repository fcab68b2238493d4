// defines: GpuRun, what training on a GPU adds to the trainer's loop: the execution context
// (streams, library handles, workspace), the compute dtype and layout of train.precision, fp16
// dynamic loss scaling with its inf/NaN check, host copies of device results, the profiler
// capture range of profile.steps, and the end-of-run memory report.
//
// Declared in every build; in a build without CUDA the constructor throws (the device choice
// never picks a GPU there), so the trainer needs no #ifdef.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "runtime/config.h"
#include "runtime/graph.h"

namespace dp::launch {

// train.precision -> the activations' dtype on the GPU. Pure.
DType compute_dtype_of(Precision precision);

class GpuRun {
 public:
  // Device `device` (this process's GPU), train.precision, train.workspace_mb, train.cudnn_api,
  // and fp16's loss scaling options.
  GpuRun(const TrainConfig& t, int device);
  ~GpuRun();
  GpuRun(const GpuRun&) = delete;
  GpuRun& operator=(const GpuRun&) = delete;

  cuda::ExecContext* exec() const;
  void* compute_stream() const;  // cudaStream_t
  DType compute() const { return compute_; }
  bool channels_last() const { return compute_ != DType::F32; }
  // ctx with this run's GPU fields (gpu, compute, channels_last) filled in.
  StepContext context(bool training, uint64_t seed, uint64_t step, Communicator* comm) const;

  // fp16 only: the loss is multiplied by loss_scale() (1 otherwise) through its gradient.
  bool scaling() const { return compute_ == DType::F16; }
  float loss_scale() const;
  // One micro-batch of a training step, enqueued on the compute stream with no host wait
  // (launch/step_readback.h): the loss of logits (N, K) f32 against labels (N) i32 (both on this
  // GPU), its gradient times `weight` times the loss scale into dlogits (made or resized here, on
  // the GPU), and the rows' label ranks for the hits. slot: the micro-batch's index in the step (0
  // starts a new step, then 1, 2, ...). classes: as SoftmaxCrossEntropy's (the classes of padded
  // rows; 0: every column).
  void enqueue_micro_batch(const models::SoftmaxCrossEntropy& loss, const Tensor& logits, const Tensor& labels,
                           Tensor& dlogits, double weight, int64_t classes, int slot);
  // The step's one host wait, once its backward is enqueued: the mean loss of each micro-batch
  // enqueued since slot 0 (in slot order), their hits added to top1/top5. A NaN loss whose
  // micro-batch has a label outside [0, K) is SoftmaxCrossEntropy's DpError naming it.
  std::vector<double> read_step(int64_t& top1, int64_t& top5);
  // The same mean loss without a gradient (evaluation).
  double mean_loss(const models::SoftmaxCrossEntropy& loss, const Tensor& logits, const Tensor& labels,
                   int64_t classes = 0) const;

  // Top-1 and top-5 hits (kernels/cpu/label_rank.h's rule) of scores (rows, K) f32 against labels
  // (rows) i32, both on this GPU, ranked there (the logits stay on the device); the host waits for
  // the ranks (evaluation: a batch at a time).
  // classes: as launch/evaluate.h count_hits's.
  void count_hits(const Tensor& scores, const Tensor& labels, int64_t& top1, int64_t& top5, int64_t classes = 0);

  // After the gradients are reduced: with fp16, unscales the fp32 gradient arena in place,
  // looks for inf/NaN (the host waits for the compute stream) and updates the scale; returns
  // false when the optimizer step must be skipped. Without fp16: true, no wait.
  bool unscale_and_update(Graph& model);
  int64_t skipped_steps() const { return skipped_; }

  // Host waits until everything enqueued on the compute stream has run.
  void synchronize() const;
  // Peak and current device memory of the stream-ordered pool, in bytes.
  uint64_t peak_bytes() const;
  uint64_t reserved_peak_bytes() const;
  uint64_t live_bytes() const;  // held by live allocations now (the memory breakdown's comparison)

  // profile.steps: cudaProfilerStart/Stop around those steps (steps count from 1).
  void profile_window(const std::string& steps);
  void before_step(int64_t step);
  void after_step(int64_t step);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  DType compute_ = DType::F32;
  int64_t skipped_ = 0;
};

}  // namespace dp::launch
