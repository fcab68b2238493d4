// The device-memory hooks (runtime/device_memory.h) on CUDA.
#include "runtime/device_memory.h"

#include <cuda_runtime.h>

#include "base/error.h"
#include "runtime/cuda/check_runtime.h"
#include "runtime/log.h"

namespace dp {

namespace {
void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw DpError(fmt::format("CUDA error in {} [{}]: {} ({})", what, identity_string(), cudaGetErrorString(e),
                              static_cast<int>(e)));
}
}  // namespace

// Storage is for long-lived tensors (arenas, activations sized once for the largest batch, test
// data), not per-step scratch: allocation, copies and frees here are device-synchronous, so
// they are safe against work still in flight on any stream (the layers' compute stream is
// non-blocking and never synchronises with the legacy default stream). Per-step scratch comes
// from cuda::ExecContext::workspace and DeviceBuffer, ordered on their streams.
void* device_alloc(size_t bytes, Device device) {
  check_cuda(cudaSetDevice(device.index), "cudaSetDevice");
  void* p = nullptr;
  CHECK_CUDA_ALLOC(cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, cudaStreamPerThread), bytes);
  check_cuda(cudaMemsetAsync(p, 0, bytes, cudaStreamPerThread), "cudaMemsetAsync");
  check_cuda(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
  return p;
}

void device_free(void* p, Device device) noexcept {
  // cudaFree of a cudaMallocAsync block does NOT synchronise: the driver assumes every access
  // has completed and the pool may hand the block to the next allocation at once. So wait for
  // the whole device first: a kernel or copy still using it on another stream is not cut short.
  cudaError_t e = cudaSetDevice(device.index);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaFree(p);
  if (e != cudaSuccess && e != cudaErrorCudartUnloading)
    log::get("memory")->error("device free (cudaDeviceSynchronize, cudaFree) failed [{}]: {}", identity_string(),
                              cudaGetErrorString(e));
}

void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  check_cuda(cudaSetDevice(dst_dev.is_cuda() ? dst_dev.index : src_dev.index), "cudaSetDevice");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a copy");
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
  // cudaMemcpy returns before a device-to-device copy (and the DMA of a pageable host-to-device
  // one) has landed, and the layers' non-blocking streams do not wait for the legacy stream.
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a copy");
}

void device_stream_synchronize(void* cuda_stream) {
  check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(cuda_stream)), "cudaStreamSynchronize");
}

void device_memset_zero(void* p, Device device, size_t bytes) {
  check_cuda(cudaSetDevice(device.index), "cudaSetDevice");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a memset");
  check_cuda(cudaMemset(p, 0, bytes), "cudaMemset");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a memset");
}

MemoryInfo device_memory_info(Device device) noexcept {
  if (device.is_cpu()) return host_memory_info();
  int current = -1;
  size_t free = 0, total = 0;
  cudaError_t e = cudaGetDevice(&current);
  if (e == cudaSuccess && current != device.index) e = cudaSetDevice(device.index);
  if (e == cudaSuccess) e = cudaMemGetInfo(&free, &total);
  if (current >= 0 && current != device.index) (void)cudaSetDevice(current);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  return {free, total};
}

bool built_with_cuda() { return true; }

int cuda_device_count() {
  int n = 0;
  // No driver (error 35) or no device means "use the CPU", never a failure.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace dp
