// defines: log_if_failed for cuBLAS and cuDNN statuses (the CUDA runtime's is in log_failure.h),
// and their ReleaseLog specialisations, which the owners of library handles need (handles.h,
// cudnn_desc.h, the cuBLASLt descriptors).
#pragma once
#include <cublas_api.h>
#include <cudnn.h>

#include "runtime/cuda/log_failure.h"

namespace dp::cuda {
void log_if_failed(cublasStatus_t s, const char* what) noexcept;
void log_if_failed(cudnnStatus_t s, const char* what) noexcept;

template <>
struct ReleaseLog<cublasStatus_t> {
  static void log(cublasStatus_t s, const char* what) noexcept { log_if_failed(s, what); }
};
template <>
struct ReleaseLog<cudnnStatus_t> {
  static void log(cudnnStatus_t s, const char* what) noexcept { log_if_failed(s, what); }
};
}  // namespace dp::cuda
