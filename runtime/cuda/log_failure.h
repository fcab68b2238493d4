// defines: log_if_failed, what the owners' destructors do with a failed release: log it
// (subsystem "cuda") and go on, never throw. A release during process teardown, after the CUDA
// runtime has unloaded (cudaErrorCudartUnloading), is expected and not logged. This header has the
// CUDA runtime's overload; cuBLAS's and cuDNN's are in log_library_failure.h, so that the kernels'
// emulation build (CUDA runtime only, kernels/cuda/emu/README.md) needs no library header.
#pragma once
#include <cuda_runtime_api.h>

namespace dp::cuda {
void log_if_failed(cudaError_t e, const char* what) noexcept;

// The log line of every overload: "<what> failed [<identity>]: <error> (<code>)".
void log_release_failure(const char* what, const char* error, int code) noexcept;

// ReleaseLog<Status>::log(status, what) is log_if_failed for the status an Owner's release returns
// (owner.h). A class template rather than a call to the overload set, because an overload declared
// after owner.h would not be found from inside its template: each library's header specialises it
// next to its overloads, and an owner whose header forgot that header does not compile.
template <typename Status>
struct ReleaseLog;
template <>
struct ReleaseLog<cudaError_t> {
  static void log(cudaError_t e, const char* what) noexcept { log_if_failed(e, what); }
};
}  // namespace dp::cuda
