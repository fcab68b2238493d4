#include "runtime/cuda/buffers.h"

#include <utility>

#include "runtime/cuda/log_failure.h"
#include "runtime/cuda/check.h"

namespace dp::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes, cudaStream_t stream) : bytes_(bytes), stream_(stream) {
  // A zero-byte request still gets a distinct pointer, so that data() != null means "owned".
  CHECK_CUDA(cudaMallocAsync(&p_, bytes == 0 ? 1 : bytes, stream));
}
DeviceBuffer::~DeviceBuffer() { release(); }
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), stream_(std::exchange(o.stream_, nullptr)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}
void DeviceBuffer::release() noexcept {
  if (p_) log_if_failed(cudaFreeAsync(p_, stream_), "cudaFreeAsync");
  p_ = nullptr;
  bytes_ = 0;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  CHECK_CUDA(cudaHostAlloc(&p_, bytes == 0 ? 1 : bytes, cudaHostAllocPortable));
}
PinnedBuffer::~PinnedBuffer() { release(); }
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    release();
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
void PinnedBuffer::release() noexcept {
  if (p_) log_if_failed(cudaFreeHost(p_), "cudaFreeHost");
  p_ = nullptr;
  bytes_ = 0;
}

}  // namespace dp::cuda
