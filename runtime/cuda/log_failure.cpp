#include "runtime/cuda/log_failure.h"

#include "base/error.h"
#include "runtime/log.h"

namespace dp::cuda {

void log_release_failure(const char* what, const char* error, int code) noexcept {
  try {
    log::get("cuda")->error("{} failed [{}]: {} ({})", what, identity_string(), error, code);
  } catch (...) {  // logging itself failed (out of memory): nothing more can be done here
  }
}

void log_if_failed(cudaError_t e, const char* what) noexcept {
  if (e == cudaSuccess || e == cudaErrorCudartUnloading) return;
  (void)cudaGetLastError();
  log_release_failure(what, cudaGetErrorString(e), static_cast<int>(e));
}

}  // namespace dp::cuda
