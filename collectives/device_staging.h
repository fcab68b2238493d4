// defines: DeviceStaging, the pinned host memory through which a host-side backend (the ring)
// carries device tensors: copy in (device to host) -> the collective on host memory -> copy out
// (host to device), synchronised before the collective's Work completes.
//
// One lease per collective in flight. Its pinned buffer comes from a pool: cudaHostAlloc only
// when no free buffer is big enough, so a training step's buckets reuse last step's buffers.
// Copy-in is issued on the issuing thread, at issue time, on the stream the caller names (the
// stream-ordered collectives: after the work already on it) or on the staging stream of the
// tensor's device; it records the lease's event there. The backend's own thread waits for that
// event (wait_in: an event synchronise, never a device-wide one) before it reads the host bytes,
// and copy_out puts the result back on the staging stream and waits for it. The staging stream
// is the backend's own: copies back never queue behind the caller's stream, which may already
// wait for later work (the reducer's comm stream waits for backward of the next bucket).
//
// Streams are cudaStream_t passed as void*, so that the header compiles without CUDA. Without
// CUDA (no device tensors can exist) acquire() throws.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/tensor.h"

namespace dp {

// The pool's choice (pure): which of `buffers` a request for `bytes` on `device` takes: the
// smallest free one of that device that is big enough; -1 when none is (allocate a new one).
struct StagingBufferInfo {
  size_t bytes = 0;
  int device = 0;
  bool busy = false;
};
int choose_staging_buffer(const std::vector<StagingBufferInfo>& buffers, size_t bytes, int device);

class DeviceStaging {
 public:
  class Lease;
  using LeasePtr = std::shared_ptr<Lease>;

  DeviceStaging();
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // At least `bytes` pinned bytes for tensors on CUDA device `device`. Thread-safe. The lease
  // gives its buffer back when the last reference goes (after waiting for its copy-in, so that
  // a copy still in flight never lands in another collective's buffer).
  LeasePtr acquire(size_t bytes, int device);
  // Pinned buffers allocated so far (a test checks reuse).
  size_t buffers_allocated() const;

 private:
  struct Buffer;
  struct Impl;
  void give_back(Buffer* b) noexcept;
  std::unique_ptr<Impl> impl_;
};

class DeviceStaging::Lease {
 public:
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  char* host() const;
  // Copies `src` (a device tensor on this lease's device) to host() + offset on `stream`
  // (cudaStream_t; null: the staging stream) and records the lease's copy-in event after it.
  // Does not block. At most one copy_in per lease.
  void copy_in(const Tensor& src, size_t offset, void* stream);
  // Blocks the calling thread until copy_in's copy has completed (nothing to wait for without).
  void wait_in();
  // Copies host() + offset into `dst` (a device tensor) on the staging stream and blocks until
  // it has completed: the result is in device memory, visible to every stream.
  void copy_out(size_t offset, const Tensor& dst);

 private:
  friend class DeviceStaging;
  Lease(DeviceStaging* owner, Buffer* buffer, int device) : owner_(owner), buffer_(buffer), device_(device) {}
  DeviceStaging* owner_;
  Buffer* buffer_;
  int device_;
  bool copied_in_ = false;
};

}  // namespace dp
