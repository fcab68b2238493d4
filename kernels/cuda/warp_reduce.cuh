// defines: warp_all_reduce, the butterfly all-reduce of one value per lane over a full warp
// (lane l combines with lane l ^ o, o = 16, 8, 4, 2, 1), and its two uses, warp_sum and
// warp_max. Every lane gets the result, and the order of the combinations depends on the lane
// alone, so the bits are the same on every run and every GPU (block_sum.cuh does the same for
// a block). For the rows of label_rank.cu, global_avgpool_kernels.cu and softmax_xent_kernels.cu.
//
//   s = warp_sum(s);                                       // fp::add for float, + for integers
//   m = warp_max(m);                                       // fmaxf
//   v = warp_all_reduce(v, [](float a, float b) { ... });  // any associative op
//
// All 32 lanes of the warp must call it (it shuffles with the full mask). Device code (.cu).
#pragma once
#include <type_traits>

#include "kernels/host_device.h"

namespace dp::kernels::cuda {

inline constexpr unsigned kFullWarpMask = 0xFFFFFFFFu;

template <typename T, typename Op>
__device__ T warp_all_reduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullWarpMask, v, o));
  return v;
}

// A float sum is fp::add (one rounding a step: never contracted, the CPU twins' order), an
// integer one plain + (exact in any order).
template <typename T>
__device__ T warp_sum(T v) {
  static_assert(std::is_same_v<T, float> || std::is_integral_v<T>, "warp_sum sums float or integers");
  if constexpr (std::is_same_v<T, float>) return warp_all_reduce(v, [](float a, float b) { return fp::add(a, b); });
  else return warp_all_reduce(v, [](T a, T b) { return a + b; });
}

__device__ inline float warp_max(float v) {
  return warp_all_reduce(v, [](float a, float b) { return fmaxf(a, b); });
}

}  // namespace dp::kernels::cuda
