#include "kernels/cuda/dropout.h"

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/philox.h"

namespace dp::kernels::cuda {
namespace {

// One thread per Philox block (4 consecutive elements), as the CPU twin's loop body.
__global__ void dropout_kernel(float* out, const float* in, int64_t n, uint32_t threshold, float scale, uint64_t seed,
                               uint64_t stream_id) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t blk = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; blk < blocks;
       blk += int64_t(gridDim.x) * blockDim.x) {
    uint32_t r[4];
    philox_block(seed, static_cast<uint64_t>(blk), stream_id, r);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t i = blk * 4 + j;
      if (i < n) out[i] = dropout_keep(r[j], threshold) ? fp::mul(in[i], scale) : 0.0f;
    }
  }
}

cudaError_t apply_mask(float* out, const float* in, int64_t n, double p, uint64_t seed, uint64_t stream_id,
                       cudaStream_t stream) {
  if (n < 0 || !(p >= 0 && p < 1)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const float scale = static_cast<float>(1.0 / (1.0 - p));  // as the CPU twin: in double, then rounded
  dropout_kernel<<<grid_1d((n + 3) / 4), kThreads, 0, stream>>>(out, in, n, dropout_keep_threshold(p), scale, seed,
                                                                 stream_id);
  DP_RETURN_LAUNCH();
}

}  // namespace

cudaError_t dropout_forward(float* y, const float* x, int64_t n, double p, uint64_t seed, uint64_t stream_id,
                            cudaStream_t stream) {
  return apply_mask(y, x, n, p, seed, stream_id, stream);
}

cudaError_t dropout_backward(float* dx, const float* dy, int64_t n, double p, uint64_t seed, uint64_t stream_id,
                             cudaStream_t stream) {
  return apply_mask(dx, dy, n, p, seed, stream_id, stream);
}

}  // namespace dp::kernels::cuda
