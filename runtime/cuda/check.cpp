#include "runtime/cuda/check.h"

namespace dp {

std::string nccl_hint(ncclResult_t r) {
  switch (r) {
    case ncclUnhandledCudaError: return "a CUDA call inside NCCL failed; see the CUDA error above it";
    case ncclSystemError: return "a socket or shared-memory call failed; check NCCL_SOCKET_IFNAME and /dev/shm size";
    case ncclRemoteError: return "a peer failed or disconnected; look at the other ranks' logs";
    case ncclInvalidUsage: return "run with NCCL_DEBUG=WARN for NCCL's explanation";
    default: return "";
  }
}

bool cudnn_status_is_device_oom(cudnnStatus_t s) { return s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED; }
bool cublas_status_is_device_oom(cublasStatus_t s) { return s == CUBLAS_STATUS_ALLOC_FAILED; }
bool cudnn_status_is_not_supported(cudnnStatus_t s) {
  switch (s) {  // a broken installation, not a shape cuDNN lacks: the error, not a fallback
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
    case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE: return false;
    default: return CUDNN_STATUS_CATEGORY(static_cast<int>(s)) == CUDNN_STATUS_NOT_SUPPORTED;
  }
}

void fail_cudnn(cudnnStatus_t s, const char* expr, const char* file, int line) {
  const std::string what = fmt::format("{} ({})", cudnnGetErrorString(s), static_cast<int>(s));
  if (cudnn_status_is_device_oom(s)) fail_device_oom(fmt::format("{}: {}", expr, what), file, line, 0);
  fail_check("cuDNN", expr, file, line, what, "");
}
void fail_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  const std::string what = fmt::format("{} ({})", cublasGetStatusString(s), static_cast<int>(s));
  if (cublas_status_is_device_oom(s)) fail_device_oom(fmt::format("{}: {}", expr, what), file, line, 0);
  fail_check("cuBLAS", expr, file, line, what, "");
}
void fail_nccl(ncclResult_t r, const char* expr, const char* file, int line) {
  fail_check("NCCL", expr, file, line, fmt::format("{} ({})", ncclGetErrorString(r), static_cast<int>(r)),
             nccl_hint(r));
}
}  // namespace dp
