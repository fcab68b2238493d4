#include "runtime/cuda/memory_pool.h"

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/check.h"

namespace dp::cuda {
namespace {
cudaMemPool_t default_pool(int device) {
  cudaMemPool_t pool = nullptr;
  CHECK_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
  return pool;
}
uint64_t attribute(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  uint64_t v = 0;  // the attribute is a cuuint64_t (64 bits)
  CHECK_CUDA(cudaMemPoolGetAttribute(pool, attr, &v));
  return v;
}
}  // namespace

void configure_memory_pool(int device) {
  uint64_t threshold = UINT64_MAX;
  CHECK_CUDA(cudaMemPoolSetAttribute(default_pool(device), cudaMemPoolAttrReleaseThreshold, &threshold));
}

MemoryPoolStats memory_pool_stats(int device) {
  cudaMemPool_t pool = default_pool(device);
  return {attribute(pool, cudaMemPoolAttrUsedMemCurrent), attribute(pool, cudaMemPoolAttrUsedMemHigh),
          attribute(pool, cudaMemPoolAttrReservedMemCurrent), attribute(pool, cudaMemPoolAttrReservedMemHigh)};
}

void reset_memory_pool_peak(int device) {
  cudaMemPool_t pool = default_pool(device);
  uint64_t zero = 0;  // the only value these attributes accept: resets the peak to the current use
  CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
  CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
}

}  // namespace dp::cuda
