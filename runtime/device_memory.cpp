#include "runtime/device_memory.h"

#include "runtime/log.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace dp {

#ifdef DPTRAIN_HAVE_CUDA
namespace {
void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw DpError(fmt::format("CUDA error in {} [{}]: {} ({})", what, identity_string(), cudaGetErrorString(e),
                              static_cast<int>(e)));
}
}  // namespace

void* device_alloc(size_t bytes, Device device) {
  check_cuda(cudaSetDevice(device.index), "cudaSetDevice");
  void* p = nullptr;
  check_cuda(cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, cudaStreamPerThread), "cudaMallocAsync");
  check_cuda(cudaMemsetAsync(p, 0, bytes, cudaStreamPerThread), "cudaMemsetAsync");
  check_cuda(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
  return p;
}

void device_free(void* p, Device device) noexcept {
  cudaError_t e = cudaFreeAsync(p, cudaStreamPerThread);
  if (e != cudaSuccess) log::get("memory")->error("cudaFreeAsync failed: {}", cudaGetErrorString(e));
}

void device_copy(void* dst, Device, const void* src, Device, size_t bytes) {
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

void device_memset_zero(void* p, Device, size_t bytes) { check_cuda(cudaMemset(p, 0, bytes), "cudaMemset"); }

int cuda_device_count() {
  int n = 0;
  // No driver (error 35) or no device means "use the CPU", never a failure.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}
#else
void* device_alloc(size_t, Device device) {
  throw DpError(fmt::format("cannot allocate on {} [{}]: this dptrain was built without CUDA", device.str(),
                            identity_string()));
}
void device_free(void*, Device) noexcept {}
void device_copy(void*, Device, const void*, Device, size_t) {
  throw DpError("device copy requested in a build without CUDA");
}
void device_memset_zero(void*, Device, size_t) { throw DpError("device memset requested in a build without CUDA"); }
int cuda_device_count() { return 0; }
#endif

}  // namespace dp
