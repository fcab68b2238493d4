// defines: BufferBroadcast, rank 0's buffers (batch norm running statistics and
// num_batches_tracked) to every rank in one broadcast: PyTorch DDP's broadcast_buffers (its
// default), dist.broadcast_buffers.
//
// Without it each rank's running statistics follow its own shard of the data, the replicas drift
// apart, and an evaluation sharded over the ranks mixes several models. DDP broadcasts rank 0's
// buffers before every forward in training; here it happens after every step (the next forward
// sees rank 0's buffers either way), so that the state at every step boundary, where checkpoints,
// replicas and evaluations are taken, is one model on every rank. SyncBN makes it unnecessary
// (the statistics are global already), and a model without buffers has nothing to send.
//
// The buffers travel packed into one host f32 staging tensor (their bytes: an i64 is two f32
// slots; a broadcast moves bytes and never does arithmetic), so a ResNet-50's 160 buffers are one
// collective, not 160.
#pragma once
#include <vector>

#include "collectives/communicator.h"
#include "runtime/graph.h"

namespace dp::launch {

class GpuRun;

class BufferBroadcast {
 public:
  explicit BufferBroadcast(const Graph& model);
  bool empty() const { return buffers_.empty(); }
  int64_t count() const { return static_cast<int64_t>(buffers_.size()); }
  size_t bytes() const { return staging_.defined() ? staging_.nbytes() : 0; }
  // Collective: every rank's buffers become rank 0's. gpu: the run's GPU side when the buffers
  // live on a GPU (its work is waited for first), else null.
  void run(Communicator& comm, GpuRun* gpu);

 private:
  std::vector<Tensor> buffers_;  // the model's buffer tensors (any device)
  std::vector<Tensor> packed_;   // their places in staging_, same shapes and dtypes
  Tensor staging_;               // host, f32, the bytes of every buffer back to back
};

}  // namespace dp::launch
