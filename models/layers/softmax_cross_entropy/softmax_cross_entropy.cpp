#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"

#include "models/layers/softmax_cross_entropy/softmax_xent_ref.h"

namespace dp::models {

void SoftmaxCrossEntropy::throw_bad_label(int32_t label, int64_t index, int64_t K) {
  throw DpError(fmt::format("softmax cross entropy: label {} at batch index {} is outside [0, {}) (the model has "
                            "{} classes)",
                            label, index, K, K));
}

void SoftmaxCrossEntropy::check_labels(const int32_t* labels, int64_t n, int64_t K) {
  for (int64_t i = 0; i < n; ++i)
    if (labels[i] < 0 || labels[i] >= K) throw_bad_label(labels[i], i, K);
}

int64_t SoftmaxCrossEntropy::classes_of(const Tensor& logits, int64_t classes) {
  const int64_t width = logits.dim(1);
  DP_CHECK(classes >= 0 && classes <= width,
           "softmax cross entropy: {} classes in logits rows of {} columns (a padded row holds at most its width)",
           classes, width);
  return classes > 0 ? classes : width;
}

SoftmaxCrossEntropy::SoftmaxCrossEntropy(double label_smoothing) : smoothing_(label_smoothing) {
  DP_CHECK(smoothing_ >= 0 && smoothing_ <= 1, "label_smoothing = {} outside [0, 1]", smoothing_);
}

double SoftmaxCrossEntropy::forward_backward(const Tensor& logits, const Tensor& labels, const Tensor* dlogits,
                                             int64_t classes) const {
  DP_CHECK(logits.ndim() == 2 && logits.dim(0) >= 1 && logits.dim(1) >= 1 && logits.device().is_cpu(),
           "softmax cross entropy: logits must be a non-empty (N, K) CPU tensor, got {}", logits.describe());
  const int64_t N = logits.dim(0), K = classes_of(logits, classes), ld = logits.dim(1);
  DP_CHECK(labels.dtype() == DType::I32 && labels.shape() == Shape{N} && labels.device().is_cpu(),
           "softmax cross entropy: labels must be i32[{}] on cpu, got {}", N, labels.describe());
  const bool want_grad = dlogits && dlogits->defined();
  if (want_grad)
    DP_CHECK(dlogits->dtype() == logits.dtype() && dlogits->shape() == logits.shape() && dlogits->device().is_cpu(),
             "softmax cross entropy: dlogits is {}, expected {}", dlogits->describe(), logits.describe());
  const int32_t* y = labels.data<int32_t>();
  check_labels(y, N, K);
  if (logits.dtype() == DType::F32)
    return kernels::cpu::softmax_xent<float>(logits.data<float>(), y, want_grad ? dlogits->data<float>() : nullptr, N,
                                             K, smoothing_, ld);
  DP_CHECK(logits.dtype() == DType::F64, "softmax cross entropy: logits must be f32 or f64, got {}",
           logits.describe());
  return kernels::cpu::softmax_xent<double>(logits.data<double>(), y, want_grad ? dlogits->data<double>() : nullptr,
                                            N, K, smoothing_, ld);
}

}  // namespace dp::models
