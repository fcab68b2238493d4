#include "kernels/cuda/sm_count.h"

#include <cuda_runtime.h>

#include <atomic>

namespace dp::kernels::cuda {

namespace {
constexpr int kMaxDevices = 64;  // more GPUs than any node has; beyond, asked every time
std::atomic<int> g_sm_count[kMaxDevices];  // 0: not asked yet
}  // namespace

int sm_count() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1;
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached) {
    const int v = g_sm_count[device].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || v <= 0) return 1;
  if (cached) g_sm_count[device].store(v, std::memory_order_relaxed);
  return v;
}

}  // namespace dp::kernels::cuda
