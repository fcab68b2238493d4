// SoftmaxCrossEntropy's device twin (the header says what it computes).
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <vector>

#include "models/layers/softmax_cross_entropy/softmax_xent_kernels.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check_runtime.h"

namespace dp::models {

// Device scratch of the GPU calls: row losses (N) then the mean (1), f32, on `stream`; and the
// pinned float forward_backward reads the mean back through.
struct SoftmaxCrossEntropy::DeviceScratch {
  cudaStream_t stream = nullptr;
  int64_t rows = -1;
  cuda::DeviceBuffer device;  // (rows + 1) f32
  cuda::PinnedBuffer host{sizeof(float)};
};

void SoftmaxCrossEntropy::enqueue(const Tensor& logits, const Tensor& labels, const Tensor* dlogits, void* stream_ptr,
                                  float* host_mean, int64_t classes) const {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  DP_CHECK(logits.defined() && logits.ndim() == 2 && logits.dim(0) >= 1 && logits.dim(1) >= 1 &&
               logits.dtype() == DType::F32 && logits.device().is_cuda(),
           "softmax cross entropy: logits must be a non-empty f32 (N, K) GPU tensor, got {}", logits.describe());
  const int64_t N = logits.dim(0), K = classes_of(logits, classes), ld = logits.dim(1);
  DP_CHECK(labels.defined() && labels.dtype() == DType::I32 && labels.shape() == Shape{N} &&
               labels.device() == logits.device(),
           "softmax cross entropy: labels must be i32[{}] on {}, got {}", N, logits.device().str(),
           labels.describe());
  const bool want_grad = dlogits && dlogits->defined();
  if (want_grad)
    DP_CHECK(dlogits->dtype() == DType::F32 && dlogits->shape() == logits.shape() &&
                 dlogits->device() == logits.device(),
             "softmax cross entropy: dlogits is {}, expected {}", dlogits->describe(), logits.describe());

  if (!scratch_) scratch_.emplace();
  DeviceScratch& s = *scratch_;
  if (s.rows < N || s.stream != stream) {
    s.device = cuda::DeviceBuffer();  // freed in the old stream's order
    s.device = cuda::DeviceBuffer(static_cast<size_t>(N + 1) * sizeof(float), stream);
    s.rows = N;
    s.stream = stream;
  }
  float* row_loss = s.device.as<float>();
  float* mean = row_loss + s.rows;
  CHECK_CUDA(kernels::cuda::softmax_xent(logits.data<float>(), labels.data<int32_t>(),
                                         want_grad ? dlogits->data<float>() : nullptr, row_loss, mean, N, K,
                                         smoothing_, stream, ld));
  CHECK_CUDA(cudaMemcpyAsync(host_mean, mean, sizeof(float), cudaMemcpyDeviceToHost, stream));
}

double SoftmaxCrossEntropy::forward_backward(const Tensor& logits, const Tensor& labels, const Tensor* dlogits,
                                             void* stream_ptr, int64_t classes) const {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (!scratch_) scratch_.emplace();
  float* host = scratch_->host.as<float>();
  enqueue(logits, labels, dlogits, stream_ptr, host, classes);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  const double loss = *host;
  if (std::isnan(loss)) {
    // NaN logits, or a label out of range (the kernel's NaN): name the label as the CPU path does.
    std::vector<int32_t> y(static_cast<size_t>(logits.dim(0)));
    CHECK_CUDA(cudaMemcpyAsync(y.data(), labels.raw(), y.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    check_labels(y.data(), logits.dim(0), classes_of(logits, classes));
  }
  return loss;
}

}  // namespace dp::models
