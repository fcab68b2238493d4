#include "runtime/cuda/handles.h"

#include <utility>

#include "runtime/cuda/log_failure.h"
#include "runtime/cuda/check.h"

namespace dp::cuda {

CublasHandle::CublasHandle(cudaStream_t stream) {
  CHECK_CUBLAS(cublasCreate(&h_));
  try {
    set_stream(stream);
  } catch (...) {  // the destructor does not run for a half-built owner
    destroy();
    throw;
  }
}
CublasHandle::~CublasHandle() { destroy(); }
CublasHandle::CublasHandle(CublasHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
CublasHandle& CublasHandle::operator=(CublasHandle&& o) noexcept {
  if (this != &o) {
    destroy();
    h_ = std::exchange(o.h_, nullptr);
  }
  return *this;
}
void CublasHandle::destroy() noexcept {
  if (h_) log_if_failed(cublasDestroy(h_), "cublasDestroy");
  h_ = nullptr;
}
void CublasHandle::set_stream(cudaStream_t stream) const { CHECK_CUBLAS(cublasSetStream(h_, stream)); }

CublasLtHandle CublasLtHandle::create() {
  CublasLtHandle h;
  CHECK_CUBLAS(cublasLtCreate(&h.h_));
  return h;
}
CublasLtHandle::~CublasLtHandle() { destroy(); }
CublasLtHandle::CublasLtHandle(CublasLtHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
CublasLtHandle& CublasLtHandle::operator=(CublasLtHandle&& o) noexcept {
  if (this != &o) {
    destroy();
    h_ = std::exchange(o.h_, nullptr);
  }
  return *this;
}
void CublasLtHandle::destroy() noexcept {
  if (h_) log_if_failed(cublasLtDestroy(h_), "cublasLtDestroy");
  h_ = nullptr;
}

CudnnHandle::CudnnHandle(cudaStream_t stream) {
  CHECK_CUDNN(cudnnCreate(&h_));
  try {
    set_stream(stream);
  } catch (...) {
    destroy();
    throw;
  }
}
CudnnHandle::~CudnnHandle() { destroy(); }
CudnnHandle::CudnnHandle(CudnnHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
CudnnHandle& CudnnHandle::operator=(CudnnHandle&& o) noexcept {
  if (this != &o) {
    destroy();
    h_ = std::exchange(o.h_, nullptr);
  }
  return *this;
}
void CudnnHandle::destroy() noexcept {
  if (h_) log_if_failed(cudnnDestroy(h_), "cudnnDestroy");
  h_ = nullptr;
}
void CudnnHandle::set_stream(cudaStream_t stream) const { CHECK_CUDNN(cudnnSetStream(h_, stream)); }

}  // namespace dp::cuda
