// defines: CudaStream and CudaEvent, move-only owners (runtime/cuda/owner.h) of a CUDA stream and
// event: destruction logs a failed destroy and never throws; a moved-from or default-constructed
// owner is empty (get() null, destruction a no-op).
#pragma once
#include <cuda_runtime_api.h>

#include "runtime/cuda/owner.h"

namespace dp::cuda {

class CudaEvent;

// A stream and the device it belongs to.
struct StreamHandle {
  cudaStream_t stream = nullptr;
  int device = -1;
  explicit operator bool() const { return stream != nullptr; }
};
struct DestroyStream {
  static constexpr const char* what = "cudaStreamDestroy";
  cudaError_t operator()(const StreamHandle& h) const noexcept { return cudaStreamDestroy(h.stream); }
};

class CudaStream : public Owner<StreamHandle, DestroyStream> {
 public:
  CudaStream() = default;
  // A non-blocking stream (no implicit sync with the legacy default stream) on `device`, which
  // becomes the calling thread's current device. priority: cudaDeviceGetStreamPriorityRange's
  // scale (lower = more urgent; 0 = default), e.g. a higher priority for the gradient all-reduce.
  explicit CudaStream(int device, int priority = 0);

  cudaStream_t get() const { return Owner::get().stream; }
  int device() const { return Owner::get().device; }
  // Work submitted to this stream after the call waits for `e`'s last record (no host wait).
  void wait(const CudaEvent& e) const;
  // Host waits for everything submitted so far (tests, end of run; not for the hot path).
  void synchronize() const;
};

DP_CUDA_DESTROY(DestroyEvent, cudaEventDestroy);

class CudaEvent : public Owner<cudaEvent_t, DestroyEvent> {
 public:
  CudaEvent() = default;
  // timing = false gives cudaEventDisableTiming, the cheaper kind for pure ordering.
  explicit CudaEvent(bool timing);

  void record(cudaStream_t stream) const;
  // True when the recorded work has completed (cudaEventQuery); false while it is pending.
  bool done() const;
  void synchronize() const;
  // Milliseconds between `start`'s record and this event's (both made with timing = true).
  float elapsed_ms_since(const CudaEvent& start) const;
};

}  // namespace dp::cuda
