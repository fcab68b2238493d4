// defines: SoftmaxCrossEntropy, the training loss (not a graph layer): softmax + cross entropy,
// mean over the batch, with PyTorch's label smoothing (F.cross_entropy(label_smoothing=...)).
#pragma once
#include "runtime/tensor.h"

namespace dp::models {

class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(double label_smoothing = 0);

  // logits (N, K) f32|f64 on the CPU, labels (N) i32 in [0, K). Returns the mean loss; writes
  // dlogits = d(mean loss)/d logits (same shape and dtype as logits) unless dlogits is null or
  // undefined. A label outside [0, K) is a DpError naming the label and its index.
  double forward_backward(const Tensor& logits, const Tensor& labels, const Tensor* dlogits) const;

  double label_smoothing() const { return smoothing_; }

 private:
  double smoothing_;
};

}  // namespace dp::models
