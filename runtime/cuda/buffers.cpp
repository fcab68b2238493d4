#include "runtime/cuda/buffers.h"

#include "runtime/cuda/check_runtime.h"

namespace dp::cuda {
namespace {
// A zero-byte request still gets a distinct pointer, so that data() != null means "owned".
MemoryBlock device_block(size_t bytes, cudaStream_t stream) {
  MemoryBlock b{nullptr, bytes, stream};
  CHECK_CUDA_ALLOC(cudaMallocAsync(&b.p, bytes == 0 ? 1 : bytes, stream), bytes);
  return b;
}
// Page-locked host memory: running out of it is the host's problem, not the GPU's.
MemoryBlock pinned_block(size_t bytes) {
  MemoryBlock b{nullptr, bytes, nullptr};
  constexpr const char* kCall = "cudaHostAlloc(&b.p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable)";
  const cudaError_t e = cudaHostAlloc(&b.p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable);
  if (e == cudaErrorMemoryAllocation) [[unlikely]] {
    (void)cudaGetLastError();
    fail_check("CUDA", kCall, __FILE__, __LINE__,
               fmt::format("{} ({}) for {} bytes of pinned host memory", cudaGetErrorString(e), static_cast<int>(e),
                           bytes),
               "the host is short of page-locked memory; lower train.batch_size or data.workers, or raise the "
               "locked-memory limit (ulimit -l)");
  }
  if (e != cudaSuccess) [[unlikely]] fail_cuda(e, kCall, __FILE__, __LINE__);
  return b;
}
}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes, cudaStream_t stream) : Owner(device_block(bytes, stream)) {}
PinnedBuffer::PinnedBuffer(size_t bytes) : Owner(pinned_block(bytes)) {}

}  // namespace dp::cuda
