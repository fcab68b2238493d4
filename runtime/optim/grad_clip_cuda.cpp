// GradClipper's GPU half (runtime/optim/grad_clip.h).
#include <cmath>

#include "kernels/cuda/grad_norm.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/stream.h"
#include "runtime/optim/grad_clip.h"

namespace dp::optim {

// The chunk sums and the total on the device (sized for one arena, made on first use), the
// total's pinned host copy, and the event after that copy.
struct GradClipper::DeviceScratch {
  DeviceScratch(int64_t n, cudaStream_t s)
      : numel(n), partial(static_cast<size_t>(kernels::cuda::sum_of_squares_scratch(n)) * sizeof(double), s),
        sum_sq(sizeof(double), s), host(sizeof(double)), copied(false) {}
  int64_t numel;
  cuda::DeviceBuffer partial, sum_sq;
  cuda::PinnedBuffer host;
  cuda::CudaEvent copied;
};

double GradClipper::clip_device(const Tensor& grads, void* stream) {
  DP_CHECK(stream != nullptr, "gradient clipping on {} needs a stream", grads.device().str());
  const auto s = static_cast<cudaStream_t>(stream);
  const int64_t n = grads.numel();
  if (!scratch_ || scratch_->numel != n) scratch_.emplace(n, s);
  DeviceScratch& d = *scratch_;
  auto* g = static_cast<float*>(grads.raw());
  CHECK_CUDA(kernels::cuda::sum_of_squares(g, n, d.partial.as<double>(), d.sum_sq.as<double>(), s));
  CHECK_CUDA(cudaMemcpyAsync(d.host.data(), d.sum_sq.data(), sizeof(double), cudaMemcpyDeviceToHost, s));
  d.copied.record(s);
  CHECK_CUDA(kernels::cuda::clip_by_norm(g, n, d.sum_sq.as<double>(), max_norm_, s));
  d.copied.synchronize();  // the norm only: the clip and what follows stay queued
  return std::sqrt(*d.host.as<double>());
}

}  // namespace dp::optim
