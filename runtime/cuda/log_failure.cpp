#include "runtime/cuda/log_failure.h"

#include "base/error.h"
#include "runtime/log.h"

namespace dp::cuda {
namespace {
void report(const char* what, const char* error, int code) noexcept {
  try {
    log::get("cuda")->error("{} failed [{}]: {} ({})", what, identity_string(), error, code);
  } catch (...) {  // logging itself failed (out of memory): nothing more can be done here
  }
}
}  // namespace

void log_if_failed(cudaError_t e, const char* what) noexcept {
  if (e == cudaSuccess || e == cudaErrorCudartUnloading) return;
  (void)cudaGetLastError();
  report(what, cudaGetErrorString(e), static_cast<int>(e));
}
void log_if_failed(cublasStatus_t s, const char* what) noexcept {
  if (s != CUBLAS_STATUS_SUCCESS) report(what, cublasGetStatusString(s), static_cast<int>(s));
}
void log_if_failed(cudnnStatus_t s, const char* what) noexcept {
  if (s != CUDNN_STATUS_SUCCESS) report(what, cudnnGetErrorString(s), static_cast<int>(s));
}

}  // namespace dp::cuda
