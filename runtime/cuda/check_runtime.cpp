#include "runtime/cuda/check_runtime.h"

namespace dp {

void fail_check(const char* lib, const char* expr, const char* file, int line, const std::string& what,
                const std::string& hint) {
  throw DpError(fmt::format("{} error: {} at {}:{} [{}]: {}{}", lib, expr, file, line, identity_string(), what,
                            hint.empty() ? "" : "; hint: " + hint));
}

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

void fail_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  fail_check("CUDA", expr, file, line, fmt::format("{} ({})", cudaGetErrorString(e), static_cast<int>(e)),
             cuda_hint(e));
}

}  // namespace dp
