// defines: CublasHandle, CublasLtHandle, CudnnHandle, move-only owners (runtime/cuda/owner.h) of
// the library handles. A handle is bound to the device current at creation; cuBLAS and cuDNN
// handles are also bound to a stream (their work goes there). Destruction logs a failed destroy
// and never throws; a moved-from or default-constructed owner is empty.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "runtime/cuda/log_library_failure.h"
#include "runtime/cuda/owner.h"

namespace dp::cuda {

DP_CUDA_DESTROY(DestroyCublas, cublasDestroy);
DP_CUDA_DESTROY(DestroyCublasLt, cublasLtDestroy);
DP_CUDA_DESTROY(DestroyCudnn, cudnnDestroy);

class CublasHandle : public Owner<cublasHandle_t, DestroyCublas> {
 public:
  CublasHandle() = default;
  explicit CublasHandle(cudaStream_t stream);
  void set_stream(cudaStream_t stream) const;
};

// cuBLASLt takes the stream per call (cublasLtMatmul), so the handle has none.
class CublasLtHandle : public Owner<cublasLtHandle_t, DestroyCublasLt> {
 public:
  CublasLtHandle() = default;
  static CublasLtHandle create();  // a new handle (the default-constructed one is empty)

 private:
  explicit CublasLtHandle(cublasLtHandle_t h) : Owner(h) {}
};

class CudnnHandle : public Owner<cudnnHandle_t, DestroyCudnn> {
 public:
  CudnnHandle() = default;
  explicit CudnnHandle(cudaStream_t stream);
  void set_stream(cudaStream_t stream) const;
};

}  // namespace dp::cuda
