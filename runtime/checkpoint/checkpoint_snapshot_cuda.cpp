// The GPU half of CheckpointSnapshot (checkpoint_snapshot.h): page-locking the host block and the
// device-to-host copies on the training's stream.
#include <cuda_runtime_api.h>

#include "runtime/checkpoint/checkpoint_snapshot.h"
#include "runtime/cuda/check_runtime.h"
#include "runtime/cuda/log_failure.h"

namespace dp::detail {

std::shared_ptr<void> pin_host_memory(void* p, size_t bytes) {
  // Registered rather than allocated with cudaHostAlloc: the block stays an ordinary Storage, so
  // the snapshot's tensors are the views write_checkpoint_tensors takes.
  CHECK_CUDA(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
  return std::shared_ptr<void>(p, [](void* q) { cuda::log_if_failed(cudaHostUnregister(q), "cudaHostUnregister"); });
}

void copy_to_host_on_stream(const std::vector<std::pair<Tensor, Tensor>>& to_from, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  for (const auto& [to, from] : to_from) {
    DP_CHECK(to.nbytes() == from.nbytes(), "snapshot copy of {} into {}", from.describe(), to.describe());
    if (to.nbytes() > 0) CHECK_CUDA(cudaMemcpyAsync(to.raw(), from.raw(), to.nbytes(), cudaMemcpyDeviceToHost, s));
  }
  // The host waits for the copies (and the step's work before them on this stream), not the file.
  CHECK_CUDA(cudaStreamSynchronize(s));
}

}  // namespace dp::detail
