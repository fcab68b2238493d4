#include "runtime/cuda/buffers.h"

#include "runtime/cuda/check_runtime.h"

namespace dp::cuda {
namespace {
// A zero-byte request still gets a distinct pointer, so that data() != null means "owned".
MemoryBlock device_block(size_t bytes, cudaStream_t stream) {
  MemoryBlock b{nullptr, bytes, stream};
  CHECK_CUDA(cudaMallocAsync(&b.p, bytes == 0 ? 1 : bytes, stream));
  return b;
}
MemoryBlock pinned_block(size_t bytes) {
  MemoryBlock b{nullptr, bytes, nullptr};
  CHECK_CUDA(cudaHostAlloc(&b.p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable));
  return b;
}
}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes, cudaStream_t stream) : Owner(device_block(bytes, stream)) {}
PinnedBuffer::PinnedBuffer(size_t bytes) : Owner(pinned_block(bytes)) {}

}  // namespace dp::cuda
