// defines: block_sum_kernel<T>, the self-tests' correct shared-memory reduction: out[b] = the sum
// of x[b * 256 .. b * 256 + 255], a tree with a __syncthreads after every level. Launch with 256
// threads per block.
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/shared_memory.cuh"

namespace dp::emu::test {

constexpr int kSumThreads = 256;

template <typename T>
__global__ void block_sum_kernel(T* out, const T* x) {
  DP_SHARED(T, part, [kSumThreads]);
  const unsigned t = threadIdx.x;
  part[t] = x[blockIdx.x * kSumThreads + t];
  __syncthreads();
  for (unsigned w = kSumThreads / 2; w > 0; w >>= 1) {
    if (t < w) part[t] += part[t + w];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = part[0];
}

}  // namespace dp::emu::test
