#include "launch/buffer_broadcast.h"

#include "base/error.h"
#include "launch/gpu_run.h"

namespace dp::launch {

BufferBroadcast::BufferBroadcast(const Graph& model) {
  size_t bytes = 0;
  for (const auto& b : model.buffers()) {
    DP_CHECK(b.tensor.nbytes() % 4 == 0, "buffer '{}' ({}) is not a whole number of 4-byte words", b.name,
             b.tensor.describe());
    buffers_.push_back(b.tensor);
    bytes += b.tensor.nbytes();
  }
  if (buffers_.empty()) return;
  staging_ = Tensor::zeros({static_cast<int64_t>(bytes / 4)}, DType::F32, Device::cpu());
  size_t at = 0;
  for (const Tensor& t : buffers_) {
    packed_.push_back(Tensor::view_of(staging_.storage(), staging_.byte_offset() + at, t.shape(), t.dtype()));
    at += t.nbytes();
  }
}

void BufferBroadcast::run(Communicator& comm, GpuRun* gpu) {
  if (buffers_.empty() || comm.size() == 1) return;
  if (gpu) gpu->synchronize();  // the forward that updated them has completed
  const bool root = comm.rank() == 0;
  if (root)
    for (size_t i = 0; i < buffers_.size(); ++i) packed_[i].copy_from(buffers_[i]);
  comm.broadcast(staging_, 0);
  if (!root)
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_from(packed_[i]);
}

}  // namespace dp::launch
