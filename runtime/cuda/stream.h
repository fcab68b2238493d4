// defines: CudaStream and CudaEvent, move-only owners of a CUDA stream and event.
//
// tiny-cuda-nn's habit: the destructor never throws; a failed destroy is logged (subsystem
// "cuda") and otherwise ignored, so an owner can be destroyed during stack unwinding.
// A moved-from or default-constructed owner is empty: get() is null and destruction is a no-op.
#pragma once
#include <cuda_runtime_api.h>

namespace dp::cuda {

class CudaEvent;

class CudaStream {
 public:
  CudaStream() = default;
  // A non-blocking stream (no implicit sync with the legacy default stream) on `device`, which
  // becomes the calling thread's current device. priority: cudaDeviceGetStreamPriorityRange's
  // scale (lower = more urgent; 0 = default), e.g. a higher priority for the gradient all-reduce.
  explicit CudaStream(int device, int priority = 0);
  ~CudaStream();
  CudaStream(CudaStream&& o) noexcept;
  CudaStream& operator=(CudaStream&& o) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return s_; }
  int device() const { return device_; }
  explicit operator bool() const { return s_ != nullptr; }
  // Work submitted to this stream after the call waits for `e`'s last record (no host wait).
  void wait(const CudaEvent& e) const;
  // Host waits for everything submitted so far (tests, end of run; not for the hot path).
  void synchronize() const;

 private:
  void destroy() noexcept;
  cudaStream_t s_ = nullptr;
  int device_ = -1;
};

class CudaEvent {
 public:
  CudaEvent() = default;
  // timing = false gives cudaEventDisableTiming, the cheaper kind for pure ordering.
  explicit CudaEvent(bool timing);
  ~CudaEvent();
  CudaEvent(CudaEvent&& o) noexcept;
  CudaEvent& operator=(CudaEvent&& o) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return e_; }
  explicit operator bool() const { return e_ != nullptr; }
  void record(cudaStream_t stream) const;
  // True when the recorded work has completed (cudaEventQuery); false while it is pending.
  bool done() const;
  void synchronize() const;
  // Milliseconds between `start`'s record and this event's (both made with timing = true).
  float elapsed_ms_since(const CudaEvent& start) const;

 private:
  void destroy() noexcept;
  cudaEvent_t e_ = nullptr;
};

}  // namespace dp::cuda
