// defines: block_sum, the sum of one value per thread over a block of kThreads threads in a fixed
// tree order (thread t adds thread t + w, w halving from kThreads / 2): the same bits on every run
// and every GPU, and the order the CPU twins reproduce where they promise bits. Every thread gets
// the sum. For the reductions of bias_grad (kernels/cuda/elementwise.cu), the cross-entropy's mean
// (softmax_xent_kernels.cu, in double), LayerNorm's row statistics (layernorm_kernels.cu) and the
// gradient norm's sums of squares (grad_norm.cu, in double: kernels/grad_norm_math.h's fold).
// warp_reduce.cuh is the same idea over one warp.
//
//   DP_SHARED(float, part, [kThreads]);
//   const float total = block_sum(part, mine);
//
// Every thread of the block must call it (it holds barriers), with blockDim.x == kThreads; `part`
// (a DP_SHARED array of at least kThreads T) is free again when it returns. Device code (.cu).
#pragma once
#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/host_device.h"

namespace dp::kernels::cuda {

template <typename T, typename Part>
__device__ T block_sum(Part&& part, T v) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "block_sum sums float or double");
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      if constexpr (std::is_same_v<T, float>) part[threadIdx.x] = fp::add(part[threadIdx.x], part[threadIdx.x + w]);
      else part[threadIdx.x] = part[threadIdx.x] + part[threadIdx.x + w];
    }
    __syncthreads();
  }
  const T r = part[0];
  __syncthreads();  // part is reused by the caller's next sum
  return r;
}

}  // namespace dp::kernels::cuda
