// defines: DeviceBuffer (stream-ordered device memory) and PinnedBuffer (page-locked host
// memory), move-only owners of raw bytes (runtime/cuda/owner.h). Destruction logs a failed free
// and never throws; a moved-from or default-constructed buffer is empty (data() null, bytes() 0).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "runtime/cuda/owner.h"

namespace dp::cuda {

// A block of memory, its size and (device memory) the stream its free is ordered on.
struct MemoryBlock {
  void* p = nullptr;
  size_t bytes = 0;
  cudaStream_t stream = nullptr;
  explicit operator bool() const { return p != nullptr; }
};
struct FreeDeviceBlock {
  static constexpr const char* what = "cudaFreeAsync";
  cudaError_t operator()(const MemoryBlock& b) const noexcept { return cudaFreeAsync(b.p, b.stream); }
};
struct FreePinnedBlock {
  static constexpr const char* what = "cudaFreeHost";
  cudaError_t operator()(const MemoryBlock& b) const noexcept { return cudaFreeHost(b.p); }
};

// Device memory from the device's stream-ordered pool (cudaMallocAsync / cudaFreeAsync), not a
// hand-written caching allocator: the pool reuses freed blocks in stream order without a device
// synchronisation (runtime/cuda/memory_pool.h keeps it from returning memory to the driver).
// The allocation and the free are ordered on `stream`: work on another stream that touches the
// buffer must wait for an event recorded on `stream` after construction, and `stream` must wait
// for that work before the buffer is destroyed; `stream` must outlive the buffer.
class DeviceBuffer : public Owner<MemoryBlock, FreeDeviceBlock> {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, cudaStream_t stream);  // contents undefined

  void* data() const { return get().p; }
  template <typename T>
  T* as() const { return static_cast<T*>(data()); }
  size_t bytes() const { return get().bytes; }
  cudaStream_t stream() const { return get().stream; }
};

// Page-locked host memory (cudaHostAlloc), the source and target of asynchronous copies (the
// input pipeline's batches, the ring backend's staging). Portable: pinned for every device.
class PinnedBuffer : public Owner<MemoryBlock, FreePinnedBlock> {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);  // contents undefined

  void* data() const { return get().p; }
  template <typename T>
  T* as() const { return static_cast<T*>(data()); }
  size_t bytes() const { return get().bytes; }
};

}  // namespace dp::cuda
