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

void fail_cudnn(cudnnStatus_t s, const char* expr, const char* file, int line) {
  fail_check("cuDNN", expr, file, line, fmt::format("{} ({})", cudnnGetErrorString(s), static_cast<int>(s)), "");
}
void fail_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  fail_check("cuBLAS", expr, file, line, fmt::format("{} ({})", cublasGetStatusString(s), static_cast<int>(s)), "");
}
void fail_nccl(ncclResult_t r, const char* expr, const char* file, int line) {
  fail_check("NCCL", expr, file, line, fmt::format("{} ({})", ncclGetErrorString(r), static_cast<int>(r)),
             nccl_hint(r));
}
}  // namespace dp
