// defines: log_if_failed, what the owners' destructors do with a failed release: log it
// (subsystem "cuda") and go on, never throw. A release during process teardown, after the CUDA
// runtime has unloaded (cudaErrorCudartUnloading), is expected and not logged.
#pragma once
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace dp::cuda {
void log_if_failed(cudaError_t e, const char* what) noexcept;
void log_if_failed(cublasStatus_t s, const char* what) noexcept;
void log_if_failed(cudnnStatus_t s, const char* what) noexcept;
}  // namespace dp::cuda
