// defines: CHECK_CUDA and CHECK_LAUNCH, the CUDA runtime's members of the check-macro family in
// base/error.h, and fail_check, the message every member of the family throws:
//   CUDA error: cudaMalloc(&p, n) at file.cu:12 [rank 0/4 on node1]: out of memory (2); hint: ...
// Only the CUDA runtime's header: the kernels' emulation build (kernels/cuda/emu/README.md),
// which has no cuBLAS, cuDNN or NCCL, uses this one; check.h adds the libraries' macros.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "base/error.h"

namespace dp {
// Throws DpError "<lib> error: <expr> at <file>:<line> [<identity>]: <what>[; hint: <hint>]".
[[noreturn]] void fail_check(const char* lib, const char* expr, const char* file, int line, const std::string& what,
                             const std::string& hint);
[[noreturn]] void fail_cuda(cudaError_t e, const char* expr, const char* file, int line);
// The hint for common causes ("" when none): pure, tested on its own.
std::string cuda_hint(cudaError_t e);
}  // namespace dp

#define CHECK_CUDA(expr)                                                                     \
  do {                                                                                       \
    cudaError_t dp_e_ = (expr);                                                              \
    if (dp_e_ != cudaSuccess) [[unlikely]] ::dp::fail_cuda(dp_e_, #expr, __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define CHECK_LAUNCH() CHECK_CUDA(cudaGetLastError())
