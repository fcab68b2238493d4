// defines: SoftmaxCrossEntropy, the training loss (not a graph layer): softmax + cross entropy,
// mean over the batch, with PyTorch's label smoothing (F.cross_entropy(label_smoothing=...)).
#pragma once
#include <memory>

#include "runtime/tensor.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dp::models {

class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(double label_smoothing = 0);
  ~SoftmaxCrossEntropy();
  SoftmaxCrossEntropy(SoftmaxCrossEntropy&&) noexcept;
  SoftmaxCrossEntropy& operator=(SoftmaxCrossEntropy&&) noexcept;

  // logits (N, K) f32|f64 on the CPU, labels (N) i32 in [0, K). Returns the mean loss; writes
  // dlogits = d(mean loss)/d logits (same shape and dtype as logits) unless dlogits is null or
  // undefined. A label outside [0, K) is a DpError naming the label and its index.
  double forward_backward(const Tensor& logits, const Tensor& labels, const Tensor* dlogits) const;

#ifdef DPTRAIN_HAVE_CUDA
  // The device twin: logits (N, K) f32, labels (N) i32 and dlogits (f32 (N, K), or null /
  // undefined: loss only) are device tensors. Enqueues kernels/cuda/softmax_xent on `stream`
  // (the caller's compute stream), copies the mean loss to pinned memory and synchronises
  // `stream` once to return it: one host synchronisation per call (per micro-batch). dlogits is
  // complete when this returns. The row-loss scratch is kept in this object, sized once per N
  // (allocated and freed in `stream`'s order, so the object must go before the stream): use one
  // object per stream at a time. A label outside [0, K) makes the loss NaN on the device; this
  // call then reads the labels back and throws the CPU path's DpError naming the label and its
  // index.
  double forward_backward(const Tensor& logits, const Tensor& labels, const Tensor* dlogits,
                          cudaStream_t stream) const;
#endif

  double label_smoothing() const { return smoothing_; }

 private:
  double smoothing_;
#ifdef DPTRAIN_HAVE_CUDA
  struct DeviceScratch;
  mutable std::unique_ptr<DeviceScratch> scratch_;
#endif
};

}  // namespace dp::models
