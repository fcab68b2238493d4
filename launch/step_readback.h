// defines: StepReadback, what a training step on a GPU reads back from the device, and when: each
// micro-batch's mean loss, its rows' label ranks (for top-1/top-5) and its labels (for the message
// of a bad one) are enqueued on the compute stream and copied to pinned slots in the stream's
// order; read() waits once, after the step's backward is enqueued, so nothing stops the host
// between forward and backward. GpuRun owns one. CUDA builds only (step_readback_cuda.cpp; it also
// runs on the CUDA emulator: tests/launch/test_cuda_step_readback.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "base/pimpl_ptr.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "runtime/tensor.h"

namespace dp::launch {

class StepReadback {
 public:
  // stream: the compute stream (a cudaStream_t) every call enqueues on.
  explicit StepReadback(void* stream);
  StepReadback(const StepReadback&) = delete;
  StepReadback& operator=(const StepReadback&) = delete;

  // Micro-batch `slot` of a step (0 starts a new step, then 1, 2, ...): the loss of logits (N, W)
  // f32 against labels (N) i32, both on the GPU, its gradient into dlogits (f32 (N, W), on the
  // GPU) times grad_scale (the micro-batch's share of the step times fp16's loss scale), and the
  // rows' label ranks (kernels/cpu/label_rank.h's rule). classes: as SoftmaxCrossEntropy's (the
  // classes of padded rows; 0: all W columns). No host wait, unless the step's sizes are new (the
  // pinned slots grow once).
  void enqueue(const models::SoftmaxCrossEntropy& loss, const Tensor& logits, const Tensor& labels,
               const Tensor& dlogits, float grad_scale, int64_t classes, int slot);
  // The step's one host wait: the mean loss of each micro-batch enqueued since slot 0, in slot
  // order; their top-1 and top-5 hits added to top1/top5. A NaN loss whose micro-batch has a label
  // outside [0, K) is SoftmaxCrossEntropy's DpError naming it (the label's index within its
  // micro-batch); NaN or inf logits give a NaN or inf loss, returned as it is.
  std::vector<double> read(int64_t& top1, int64_t& top5);

 private:
  struct Impl;
  PimplPtr<Impl> impl_;
};

}  // namespace dp::launch
