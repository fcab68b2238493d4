// GradClipper's GPU half (runtime/optim/grad_clip.h).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/grad_norm.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/stream.h"
#include "runtime/optim/grad_clip.h"

namespace dp::optim {

// The chunk sums (sized for the longest arena or piece so far, made again for a longer one), one
// squared sum per piece (slots; clip() uses the first) and their pinned host copy, the global sum
// clip_pieces sends back to the device and its pinned source, and the event after the host copy.
struct GradClipper::DeviceScratch {
  DeviceScratch(int64_t n, size_t slot_count, cudaStream_t s)
      : numel(n), slots(slot_count),
        partial(static_cast<size_t>(kernels::cuda::sum_of_squares_scratch(n)) * sizeof(double), s),
        sum_sq(slot_count * sizeof(double), s), host(slot_count * sizeof(double)), total(sizeof(double), s),
        host_total(sizeof(double)), copied(false) {}
  int64_t numel;
  size_t slots;
  cuda::DeviceBuffer partial, sum_sq;
  cuda::PinnedBuffer host;
  cuda::DeviceBuffer total;
  cuda::PinnedBuffer host_total;
  cuda::CudaEvent copied;
};

GradClipper::DeviceScratch& GradClipper::device_scratch(int64_t n, size_t slots, void* stream) {
  if (!scratch_ || scratch_->numel < n || scratch_->slots < slots)
    scratch_.emplace(std::max({n, scratch_ ? scratch_->numel : int64_t{0}, int64_t{1}}),
                     std::max(slots, scratch_ ? scratch_->slots : size_t{1}), static_cast<cudaStream_t>(stream));
  return *scratch_;
}

double GradClipper::clip_device(const Tensor& grads, void* stream) {
  DP_CHECK(stream != nullptr, "gradient clipping on {} needs a stream", grads.device().str());
  const auto s = static_cast<cudaStream_t>(stream);
  const int64_t n = grads.numel();
  DeviceScratch& d = device_scratch(n, 1, stream);
  auto* g = static_cast<float*>(grads.raw());
  CHECK_CUDA(kernels::cuda::sum_of_squares(g, n, d.partial.as<double>(), d.sum_sq.as<double>(), s));
  CHECK_CUDA(cudaMemcpyAsync(d.host.data(), d.sum_sq.data(), sizeof(double), cudaMemcpyDeviceToHost, s));
  d.copied.record(s);
  CHECK_CUDA(kernels::cuda::clip_by_norm(g, n, d.sum_sq.as<double>(), max_norm_, s));
  d.copied.synchronize();  // the norm only: the clip and what follows stay queued
  return std::sqrt(*d.host.as<double>());
}

double GradClipper::clip_pieces_device(const Tensor& grads, const std::vector<ArenaPiece>& pieces,
                                       const Reduce& reduce, void* stream) {
  DP_CHECK(stream != nullptr, "gradient clipping on {} needs a stream", grads.device().str());
  const auto s = static_cast<cudaStream_t>(stream);
  int64_t widest = 0;
  for (const ArenaPiece& pc : pieces) widest = std::max(widest, pc.len);
  DeviceScratch& d = device_scratch(widest, pieces.size(), stream);
  auto* g = static_cast<float*>(grads.raw());
  for (size_t k = 0; k < pieces.size(); ++k)
    CHECK_CUDA(kernels::cuda::sum_of_squares(g + pieces[k].arena_begin, pieces[k].len, d.partial.as<double>(),
                                             d.sum_sq.as<double>() + k, s));
  CHECK_CUDA(cudaMemcpyAsync(d.host.data(), d.sum_sq.data(), pieces.size() * sizeof(double), cudaMemcpyDeviceToHost,
                             s));
  d.copied.record(s);
  d.copied.synchronize();  // also: the last call's copy from host_total is done before it is written again
  double local = 0;
  for (size_t k = 0; k < pieces.size(); ++k) local += d.host.as<double>()[k];
  const double sum_sq = reduce(local);
  *d.host_total.as<double>() = sum_sq;
  CHECK_CUDA(cudaMemcpyAsync(d.total.data(), d.host_total.data(), sizeof(double), cudaMemcpyHostToDevice, s));
  for (const ArenaPiece& pc : pieces)
    CHECK_CUDA(kernels::cuda::clip_by_norm(g + pc.arena_begin, pc.len, d.total.as<double>(), max_norm_, s));
  return std::sqrt(sum_sq);
}

}  // namespace dp::optim
