#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/label_rank.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/warp_reduce.cuh"

namespace dp::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per row: each lane counts the scores above the label's in its columns, then
// warp_sum adds the counts (integers: any order gives the same count).
__global__ void label_ranks_kernel(const float* z, const int32_t* y, int64_t rows, int64_t K, int64_t ld,
                                   int32_t cap, int32_t* out) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32; r < rows; r += warps) {
    const int32_t label = y[r];
    if (label < 0 || label >= K) {  // the same for every lane of the warp
      if (lane == 0) out[r] = cap;
      continue;
    }
    const float* row = z + r * ld;  // (K) of a row of ld
    const float target = row[label];
    long long higher = 0;
    for (int64_t k = lane; k < K; k += 32) higher += row[k] > target;
    higher = warp_sum(higher);
    if (lane == 0) out[r] = static_cast<int32_t>(higher < cap ? higher : cap);
  }
}

}  // namespace

cudaError_t label_ranks(const float* z, const int32_t* y, int64_t rows, int64_t K, int32_t cap, int32_t* out,
                        cudaStream_t stream, int64_t ld) {
  if (rows < 0 || K < 1 || cap < 1 || (ld != 0 && ld < K)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const unsigned blocks = grid_1d(rows, kWarpsPerBlock);
  DP_LAUNCH(label_ranks_kernel, blocks, kWarpsPerBlock * 32, 0, stream)(z, y, rows, K, ld > 0 ? ld : K, cap, out);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
