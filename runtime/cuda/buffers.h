// defines: DeviceBuffer (stream-ordered device memory) and PinnedBuffer (page-locked host
// memory), move-only owners of raw bytes. Destructors log a failed free and never throw; a
// moved-from or default-constructed buffer is empty (data() null, bytes() 0).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace dp::cuda {

// Device memory from the device's stream-ordered pool (cudaMallocAsync / cudaFreeAsync), not a
// hand-written caching allocator: the pool reuses freed blocks in stream order without a device
// synchronisation (runtime/cuda/memory_pool.h keeps it from returning memory to the driver).
// The allocation and the free are ordered on `stream`: work on another stream that touches the
// buffer must wait for an event recorded on `stream` after construction, and `stream` must wait
// for that work before the buffer is destroyed; `stream` must outlive the buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, cudaStream_t stream);  // contents undefined
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return p_; }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  cudaStream_t stream() const { return stream_; }

 private:
  void release() noexcept;
  void* p_ = nullptr;
  size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

// Page-locked host memory (cudaHostAlloc), the source and target of asynchronous copies (the
// input pipeline's batches, the ring backend's staging). Portable: pinned for every device.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);  // contents undefined
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return p_; }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dp::cuda
