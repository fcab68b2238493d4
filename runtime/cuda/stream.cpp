#include "runtime/cuda/stream.h"

#include <utility>

#include "runtime/cuda/log_failure.h"
#include "runtime/cuda/check.h"

namespace dp::cuda {

CudaStream::CudaStream(int device, int priority) : device_(device) {
  CHECK_CUDA(cudaSetDevice(device));
  CHECK_CUDA(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, priority));
}
CudaStream::~CudaStream() { destroy(); }
CudaStream::CudaStream(CudaStream&& o) noexcept
    : s_(std::exchange(o.s_, nullptr)), device_(std::exchange(o.device_, -1)) {}
CudaStream& CudaStream::operator=(CudaStream&& o) noexcept {
  if (this != &o) {
    destroy();
    s_ = std::exchange(o.s_, nullptr);
    device_ = std::exchange(o.device_, -1);
  }
  return *this;
}
void CudaStream::destroy() noexcept {
  if (s_) log_if_failed(cudaStreamDestroy(s_), "cudaStreamDestroy");
  s_ = nullptr;
}
void CudaStream::wait(const CudaEvent& e) const { CHECK_CUDA(cudaStreamWaitEvent(s_, e.get(), 0)); }
void CudaStream::synchronize() const { CHECK_CUDA(cudaStreamSynchronize(s_)); }

CudaEvent::CudaEvent(bool timing) {
  CHECK_CUDA(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
CudaEvent::~CudaEvent() { destroy(); }
CudaEvent::CudaEvent(CudaEvent&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
  if (this != &o) {
    destroy();
    e_ = std::exchange(o.e_, nullptr);
  }
  return *this;
}
void CudaEvent::destroy() noexcept {
  if (e_) log_if_failed(cudaEventDestroy(e_), "cudaEventDestroy");
  e_ = nullptr;
}
void CudaEvent::record(cudaStream_t stream) const { CHECK_CUDA(cudaEventRecord(e_, stream)); }
bool CudaEvent::done() const {
  const cudaError_t r = cudaEventQuery(e_);
  if (r == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not-ready is not sticky, but clear it so a later CHECK_LAUNCH does not see it
    return false;
  }
  CHECK_CUDA(r);
  return true;
}
void CudaEvent::synchronize() const { CHECK_CUDA(cudaEventSynchronize(e_)); }
float CudaEvent::elapsed_ms_since(const CudaEvent& start) const {
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), e_));
  return ms;
}

}  // namespace dp::cuda
