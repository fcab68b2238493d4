#include "runtime/cuda/exec_context.h"

#include <algorithm>

#include "runtime/cuda/memory_pool.h"
#include "runtime/cuda/check.h"
#include "runtime/device_error.h"

namespace dp::cuda {

namespace {
int comm_priority() {
  // The gradient all-reduce's copies should not queue behind backward's kernels: the most urgent
  // priority the device offers (lower numbers are more urgent).
  int least = 0, greatest = 0;
  CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return greatest;
}
}  // namespace

ExecContext::ExecContext(int device, size_t workspace_limit_bytes)
    : device_(device), workspace_limit_(workspace_limit_bytes) {
  CHECK_CUDA(cudaSetDevice(device));
  configure_memory_pool(device);
  compute_ = CudaStream(device);
  data_ = CudaStream(device);
  comm_ = CudaStream(device, comm_priority());
  cudnn_ = CudnnHandle(compute_.get());
  cublas_ = CublasHandle(compute_.get());
  cublaslt_ = CublasLtHandle::create();
}

void* ExecContext::workspace(size_t bytes, size_t limit) {
  DP_CHECK(bytes <= std::max(limit, workspace_limit_), "workspace of {} bytes asked for, above the limit of {}", bytes,
           std::max(limit, workspace_limit_));
  if (bytes == 0) return nullptr;
  if (workspace_.bytes() < bytes) {
    workspace_ = DeviceBuffer();  // freed in stream order on compute(), before the new block
    try {
      workspace_ = DeviceBuffer(bytes, compute_.get());
    } catch (DeviceOutOfMemory& e) {
      e.set_allocation(fmt::format("the cuDNN/cuBLASLt workspace ({} bytes; train.workspace_mb allows {}, more only for "
                                   "the deterministic attention backward)",
                                   bytes, workspace_limit_),
                       true);
      throw;
    }
  }
  return workspace_.data();
}

}  // namespace dp::cuda
