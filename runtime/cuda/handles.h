// defines: CublasHandle, CublasLtHandle, CudnnHandle, move-only owners of the library handles.
// A handle is bound to the device current at creation; cuBLAS and cuDNN handles are also bound
// to a stream (their work goes there). Destructors log a failed destroy and never throw; a
// moved-from or default-constructed owner is empty.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace dp::cuda {

class CublasHandle {
 public:
  CublasHandle() = default;
  explicit CublasHandle(cudaStream_t stream);
  ~CublasHandle();
  CublasHandle(CublasHandle&& o) noexcept;
  CublasHandle& operator=(CublasHandle&& o) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }
  void set_stream(cudaStream_t stream) const;

 private:
  void destroy() noexcept;
  cublasHandle_t h_ = nullptr;
};

// cuBLASLt takes the stream per call (cublasLtMatmul), so the handle has none.
class CublasLtHandle {
 public:
  CublasLtHandle() = default;
  static CublasLtHandle create();  // a new handle (the default-constructed one is empty)
  ~CublasLtHandle();
  CublasLtHandle(CublasLtHandle&& o) noexcept;
  CublasLtHandle& operator=(CublasLtHandle&& o) noexcept;
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
  cublasLtHandle_t get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  void destroy() noexcept;
  cublasLtHandle_t h_ = nullptr;
};

class CudnnHandle {
 public:
  CudnnHandle() = default;
  explicit CudnnHandle(cudaStream_t stream);
  ~CudnnHandle();
  CudnnHandle(CudnnHandle&& o) noexcept;
  CudnnHandle& operator=(CudnnHandle&& o) noexcept;
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  cudnnHandle_t get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }
  void set_stream(cudaStream_t stream) const;

 private:
  void destroy() noexcept;
  cudnnHandle_t h_ = nullptr;
};

}  // namespace dp::cuda
