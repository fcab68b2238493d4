#include "runtime/cuda/stream.h"

#include "runtime/cuda/check_runtime.h"

namespace dp::cuda {
namespace {
StreamHandle create_stream(int device, int priority) {
  CHECK_CUDA(cudaSetDevice(device));
  StreamHandle h{nullptr, device};
  CHECK_CUDA(cudaStreamCreateWithPriority(&h.stream, cudaStreamNonBlocking, priority));
  return h;
}
cudaEvent_t create_event(bool timing) {
  cudaEvent_t e = nullptr;
  CHECK_CUDA(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}
}  // namespace

CudaStream::CudaStream(int device, int priority) : Owner(create_stream(device, priority)) {}
void CudaStream::wait(const CudaEvent& e) const { CHECK_CUDA(cudaStreamWaitEvent(get(), e.get(), 0)); }
void CudaStream::synchronize() const { CHECK_CUDA(cudaStreamSynchronize(get())); }

CudaEvent::CudaEvent(bool timing) : Owner(create_event(timing)) {}
void CudaEvent::record(cudaStream_t stream) const { CHECK_CUDA(cudaEventRecord(get(), stream)); }
bool CudaEvent::done() const {
  const cudaError_t r = cudaEventQuery(get());
  if (r == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not-ready is not sticky, but clear it so a later CHECK_LAUNCH does not see it
    return false;
  }
  CHECK_CUDA(r);
  return true;
}
void CudaEvent::synchronize() const { CHECK_CUDA(cudaEventSynchronize(get())); }
float CudaEvent::elapsed_ms_since(const CudaEvent& start) const {
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), get()));
  return ms;
}

}  // namespace dp::cuda
