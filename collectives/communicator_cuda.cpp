// Communicator's default stream-ordered collectives (collectives/communicator.h), on CUDA: the
// stream synchronised, then the plain form.
#include "collectives/communicator.h"

#include "runtime/cuda/check.h"

namespace dp {

WorkPtr Communicator::allreduce_stream_async(const Tensor& t, ReduceOp op, void* stream) {
  check_stream_tensor(t, backend(), "allreduce_stream_async");
  CHECK_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  return allreduce_async(t, op);
}

WorkPtr Communicator::reduce_scatter_blocks_stream_async(const Tensor& t, ReduceOp op, void* stream) {
  check_stream_tensor(t, backend(), "reduce_scatter_blocks_stream_async");
  CHECK_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  return reduce_scatter_blocks_async(t, op);
}

}  // namespace dp
