// Communicator's default stream-ordered all-reduce (collectives/communicator.h), on CUDA.
#include "collectives/communicator.h"

#include "runtime/cuda/check.h"

namespace dp {

WorkPtr Communicator::allreduce_stream_async(const Tensor& t, ReduceOp op, void* stream) {
  DP_CHECK(t.defined() && t.device().is_cuda(), "{} allreduce_stream_async: takes a device tensor, got {}", backend(),
           t.defined() ? t.describe() : "an undefined tensor");
  CHECK_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  return allreduce_async(t, op);
}

}  // namespace dp
