// defines: CHECK_CUDNN, CHECK_CUBLAS, CHECK_NCCL — the CUDA libraries' members of the check-macro
// family in base/error.h — beside CHECK_CUDA and CHECK_LAUNCH (check_runtime.h, included). Same
// message shape:
//   cuDNN error: cudnnCreate(&h) at file.cpp:12 [rank 0/4 on node1]: CUDNN_STATUS_... (2000)
// An allocation failure inside cuDNN or cuBLAS(Lt) is a DeviceOutOfMemory instead. Raised inside
// a layer, the error also names the layer and pass (Layer::forward/backward add it).
#pragma once
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>

#include "runtime/cuda/check_runtime.h"

namespace dp {
[[noreturn]] void fail_cudnn(cudnnStatus_t s, const char* expr, const char* file, int line);
[[noreturn]] void fail_cublas(cublasStatus_t s, const char* expr, const char* file, int line);
[[noreturn]] void fail_nccl(ncclResult_t r, const char* expr, const char* file, int line);
// The hint for common causes ("" when none): pure, tested on its own.
std::string nccl_hint(ncclResult_t r);
// The statuses that mean "a device allocation inside the library failed": fail_cudnn and
// fail_cublas throw DeviceOutOfMemory for them (runtime/device_error.h). Pure.
bool cudnn_status_is_device_oom(cudnnStatus_t s);
bool cublas_status_is_device_oom(cublasStatus_t s);
// "cuDNN cannot do this here": CUDNN_STATUS_NOT_SUPPORTED or any of cuDNN 9's sub-codes
// (CUDNN_STATUS_NOT_SUPPORTED_SHAPE, _DATA_TYPE, _LAYOUT, ... 3001-3014), classified by
// CUDNN_STATUS_CATEGORY. Every call site with a documented fallback asks this, never == 3000.
// Not the sub-codes of a broken installation (3005-3009: the driver, the CUDA runtime or the GPU's
// architecture does not match, a prerequisite or sub-library is missing): falling back on those
// would move every layer to the own kernels for good, with a warning each; they fail instead.
// Pure.
bool cudnn_status_is_not_supported(cudnnStatus_t s);
}  // namespace dp

#define CHECK_CUDNN(expr)                                                                    \
  do {                                                                                       \
    cudnnStatus_t dp_s_ = (expr);                                                            \
    if (dp_s_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                                          \
      ::dp::fail_cudnn(dp_s_, #expr, __FILE__, __LINE__);                                    \
  } while (0)
#define CHECK_CUBLAS(expr)                                                                   \
  do {                                                                                       \
    cublasStatus_t dp_s_ = (expr);                                                           \
    if (dp_s_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                         \
      ::dp::fail_cublas(dp_s_, #expr, __FILE__, __LINE__);                                   \
  } while (0)
#define CHECK_NCCL(expr)                                                                     \
  do {                                                                                       \
    ncclResult_t dp_r_ = (expr);                                                             \
    if (dp_r_ != ncclSuccess && dp_r_ != ncclInProgress) [[unlikely]]                        \
      ::dp::fail_nccl(dp_r_, #expr, __FILE__, __LINE__);                                     \
  } while (0)
