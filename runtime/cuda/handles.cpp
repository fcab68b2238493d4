#include "runtime/cuda/handles.h"

#include "runtime/cuda/check.h"

namespace dp::cuda {
namespace {
cublasHandle_t create_cublas() {
  cublasHandle_t h = nullptr;
  CHECK_CUBLAS(cublasCreate(&h));
  return h;
}
cudnnHandle_t create_cudnn() {
  cudnnHandle_t h = nullptr;
  CHECK_CUDNN(cudnnCreate(&h));
  return h;
}
}  // namespace

// A failing set_stream destroys the new handle: the Owner base is complete by then.
CublasHandle::CublasHandle(cudaStream_t stream) : Owner(create_cublas()) { set_stream(stream); }
void CublasHandle::set_stream(cudaStream_t stream) const { CHECK_CUBLAS(cublasSetStream(get(), stream)); }

CublasLtHandle CublasLtHandle::create() {
  cublasLtHandle_t h = nullptr;
  CHECK_CUBLAS(cublasLtCreate(&h));
  return CublasLtHandle(h);
}

CudnnHandle::CudnnHandle(cudaStream_t stream) : Owner(create_cudnn()) { set_stream(stream); }
void CudnnHandle::set_stream(cudaStream_t stream) const { CHECK_CUDNN(cudnnSetStream(get(), stream)); }

}  // namespace dp::cuda
