// defines: SoftmaxCrossEntropy, the training loss (not a graph layer): softmax + cross entropy,
// mean over the batch, with PyTorch's label smoothing (F.cross_entropy(label_smoothing=...)).
#pragma once
#include "base/pimpl_ptr.h"
#include "runtime/tensor.h"

namespace dp::models {

class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(double label_smoothing = 0);

  // logits (N, K) f32|f64 on the CPU, labels (N) i32 in [0, K). Returns the mean loss; writes
  // dlogits = d(mean loss)/d logits (same shape and dtype as logits) unless dlogits is null or
  // undefined. A label outside [0, K) is a DpError naming the label and its index.
  // classes: K when the logits' rows are padded (a padded LM head's (N, Vp) rows, of which the
  // first V are the classes: models::output_width), 0: every column. The padding is outside the
  // softmax and its gradient is 0.
  double forward_backward(const Tensor& logits, const Tensor& labels, const Tensor* dlogits,
                          int64_t classes = 0) const;

  // The device twin (softmax_cross_entropy_cuda.cpp, CUDA builds only): logits (N, K) f32,
  // labels (N) i32 and dlogits (f32 (N, K), or null / undefined: loss only) are device tensors.
  // enqueue: kernels/cuda/softmax_xent on `stream` (a cudaStream_t, passed as void* so that this
  // header compiles without CUDA: the caller's compute stream), then the mean loss (f32) copied to
  // host_mean (pinned memory) in the stream's order; no host wait: host_mean and dlogits are
  // complete once the stream is synchronised. A label outside [0, K) makes the mean NaN; whoever
  // reads it then checks a host copy of the labels with check_labels. The row-loss scratch is
  // kept in this object, sized once per N (allocated and freed in `stream`'s order, so the object
  // must go before the stream): use one object per stream at a time.
  void enqueue(const Tensor& logits, const Tensor& labels, const Tensor* dlogits, void* stream, float* host_mean,
               int64_t classes = 0) const;
  // enqueue, then one host synchronisation of `stream` to return the mean loss, with the CPU
  // path's DpError for a label outside [0, K) (the labels are read back when the mean is NaN).
  double forward_backward(const Tensor& logits, const Tensor& labels, const Tensor* dlogits, void* stream,
                          int64_t classes = 0) const;

  // The CPU path's DpError naming the first of labels[0, n) (host memory) outside [0, K); none
  // when every label is inside.
  static void check_labels(const int32_t* labels, int64_t n, int64_t K);

  double label_smoothing() const { return smoothing_; }

 private:
  // The DpError of a label outside [0, K) at batch index `index`.
  [[noreturn]] static void throw_bad_label(int32_t label, int64_t index, int64_t K);
  // The classes of logits (N, W): `classes`, or W when 0; a DpError unless 1 <= classes <= W.
  static int64_t classes_of(const Tensor& logits, int64_t classes);
  double smoothing_;
  struct DeviceScratch;  // the device twin's (softmax_cross_entropy_cuda.cpp)
  mutable PimplPtr<DeviceScratch> scratch_;
};

}  // namespace dp::models
