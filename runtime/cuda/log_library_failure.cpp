#include "runtime/cuda/log_library_failure.h"

namespace dp::cuda {

void log_if_failed(cublasStatus_t s, const char* what) noexcept {
  if (s != CUBLAS_STATUS_SUCCESS) log_release_failure(what, cublasGetStatusString(s), static_cast<int>(s));
}
void log_if_failed(cudnnStatus_t s, const char* what) noexcept {
  if (s != CUDNN_STATUS_SUCCESS) log_release_failure(what, cudnnGetErrorString(s), static_cast<int>(s));
}

}  // namespace dp::cuda
