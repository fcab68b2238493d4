// defines: the emulation build's memory calls — cudaMalloc/Async, cudaFree/Async,
// cudaMallocHost, cudaHostAlloc, cudaFreeHost, cudaMemcpy/Async, cudaMemset/Async, cudaMemGetInfo
// and the default pool's attributes — backed by host memory, up to an 80 GiB device.
//
// "Device" memory is an ordinary heap block of exactly the requested size (so AddressSanitizer
// puts its red zones right after the last byte: an off-by-one kernel write is an ASan report),
// aligned to 256 bytes like cudaMalloc's, and filled with 0xFF bytes (NaN in f32/f16/bf16), since
// a kernel must not rely on fresh device memory being zero. Every allocation is registered, so
// a copy or memset whose device side leaves its allocation, or a free of a pointer that is not
// one, fails with cudaErrorInvalidValue and a message, as CUDA would refuse it. Work runs
// synchronously at enqueue: an Async call is complete when it returns.
#pragma once
#include <cstddef>

#include "kernels/cuda/emu/types.h"

cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream);
cudaError_t cudaFree(void* p);
cudaError_t cudaFreeAsync(void* p, cudaStream_t stream);
cudaError_t cudaMallocHost(void** p, size_t bytes);
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int flags);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemset(void* p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream = 0);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value);

// The typed overloads of CUDA's cuda_runtime.h.
template <typename T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
template <typename T>
cudaError_t cudaMallocAsync(T** p, size_t bytes, cudaStream_t stream) {
  return cudaMallocAsync(reinterpret_cast<void**>(p), bytes, stream);
}
template <typename T>
cudaError_t cudaMallocHost(T** p, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(p), bytes);
}
template <typename T>
cudaError_t cudaHostAlloc(T** p, size_t bytes, unsigned int flags) {
  return cudaHostAlloc(reinterpret_cast<void**>(p), bytes, flags);
}

namespace dp::emu {
// The emulated device's memory (cudaDeviceProp::totalGlobalMem, cudaMemGetInfo's total): device
// allocations beyond it fail with cudaErrorMemoryAllocation, as on a GPU, without touching the host.
inline constexpr size_t kDeviceCapacity = size_t{80} << 30;
// Bytes of device memory now allocated (tests check that nothing leaks).
size_t device_bytes_in_use();
// Whether [p, p + bytes) lies inside one live device allocation (the emulated libraries check
// their operands with it, as the copies do).
bool is_device_range(const void* p, size_t bytes);
}  // namespace dp::emu
