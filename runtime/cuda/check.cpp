#include "runtime/cuda/check.h"

namespace dp {
namespace {
[[noreturn]] void fail(const char* lib, const char* expr, const char* file, int line, const std::string& what,
                       const std::string& hint) {
  throw DpError(fmt::format("{} error: {} at {}:{} [{}]: {}{}", lib, expr, file, line, identity_string(), what,
                            hint.empty() ? "" : "; hint: " + hint));
}
}  // namespace

std::string cuda_hint(cudaError_t e) {
  switch (e) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
      return "no usable GPU on this host; run with train.device = \"cpu\" or check nvidia-smi";
    case cudaErrorMemoryAllocation:
      return "the GPU is out of memory; lower train.batch_size or use train.precision = \"bf16\"";
    case cudaErrorInvalidDevice:
      return "the device index is beyond the visible GPUs; check CUDA_VISIBLE_DEVICES and the local rank";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "this binary was not built for this GPU; rebuild with -DCMAKE_CUDA_ARCHITECTURES=<sm of the GPU>";
    default:
      return "";
  }
}

std::string nccl_hint(ncclResult_t r) {
  switch (r) {
    case ncclUnhandledCudaError: return "a CUDA call inside NCCL failed; see the CUDA error above it";
    case ncclSystemError: return "a socket or shared-memory call failed; check NCCL_SOCKET_IFNAME and /dev/shm size";
    case ncclRemoteError: return "a peer failed or disconnected; look at the other ranks' logs";
    case ncclInvalidUsage: return "run with NCCL_DEBUG=WARN for NCCL's explanation";
    default: return "";
  }
}

void fail_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  fail("CUDA", expr, file, line, fmt::format("{} ({})", cudaGetErrorString(e), static_cast<int>(e)), cuda_hint(e));
}
void fail_cudnn(cudnnStatus_t s, const char* expr, const char* file, int line) {
  fail("cuDNN", expr, file, line, fmt::format("{} ({})", cudnnGetErrorString(s), static_cast<int>(s)), "");
}
void fail_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  fail("cuBLAS", expr, file, line, fmt::format("{} ({})", cublasGetStatusString(s), static_cast<int>(s)), "");
}
void fail_nccl(ncclResult_t r, const char* expr, const char* file, int line) {
  fail("NCCL", expr, file, line, fmt::format("{} ({})", ncclGetErrorString(r), static_cast<int>(r)), nccl_hint(r));
}
}  // namespace dp
