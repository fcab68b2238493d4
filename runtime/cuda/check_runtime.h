// defines: CHECK_CUDA, CHECK_CUDA_ALLOC and CHECK_LAUNCH, the CUDA runtime's members of the check-macro family in
// base/error.h, and fail_check, the message every member of the family throws:
//   CUDA error: cudaMemcpy(...) at file.cu:12 [rank 0/4 on node1]: invalid argument (1); hint: ...
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
// cudaErrorMemoryAllocation becomes DeviceOutOfMemory (runtime/device_error.h, size not known);
// an asynchronous kernel fault names the layer dispatched last (runtime/last_dispatch.h).
[[noreturn]] void fail_cuda(cudaError_t e, const char* expr, const char* file, int line);
// fail_cuda for an allocation of `bytes`: cudaErrorMemoryAllocation becomes DeviceOutOfMemory with
// the bytes asked.
[[noreturn]] void fail_cuda_alloc(cudaError_t e, const char* expr, const char* file, int line, size_t bytes);
// Throws DeviceOutOfMemory: `call` (at file:line) failed to allocate `bytes` (0: not known) on the
// current device; the message has the device's free memory. Clears the CUDA runtime's last error
// first: a failed allocation is not sticky, and the next CHECK_LAUNCH must not report it again.
[[noreturn]] void fail_device_oom(const std::string& call, const char* file, int line, size_t bytes);
// The hint for common causes ("" when none; out of memory has its own error): pure, tested on its own.
std::string cuda_hint(cudaError_t e);
// An error a faulting kernel leaves (an illegal address, a trap, ...): reported at a later call
// than the one that caused it, and sticky (the CUDA context is unusable afterwards). Pure.
bool cuda_error_is_async_fault(cudaError_t e);
// fail_cuda's hint for such an error; last: last_dispatch() ("" when no layer was). Pure.
std::string async_fault_hint(const std::string& last);
}  // namespace dp

#define CHECK_CUDA(expr)                                                                     \
  do {                                                                                       \
    cudaError_t dp_e_ = (expr);                                                              \
    if (dp_e_ != cudaSuccess) [[unlikely]] ::dp::fail_cuda(dp_e_, #expr, __FILE__, __LINE__); \
  } while (0)
// CHECK_CUDA for a call that allocates `bytes` on the device (cudaMallocAsync, ...).
#define CHECK_CUDA_ALLOC(expr, bytes)                                                        \
  do {                                                                                       \
    cudaError_t dp_e_ = (expr);                                                              \
    if (dp_e_ != cudaSuccess) [[unlikely]]                                                   \
      ::dp::fail_cuda_alloc(dp_e_, #expr, __FILE__, __LINE__, (bytes));                      \
  } while (0)
// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define CHECK_LAUNCH() CHECK_CUDA(cudaGetLastError())
