#include "models/layers/softmax_cross_entropy/softmax_xent_kernels.h"

#include "kernels/cuda/block_sum.cuh"
#include "kernels/host_device.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/cuda/warp_reduce.cuh"

namespace dp::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
// One warp per row: z (K, in a row of ld) -> row_loss, and dlogits (K) unless null, its padding
// [K, ld) 0. The lanes' partial max and sums meet in warp_max / warp_sum (every lane gets them, in
// an order fixed by K alone).
__global__ void xent_rows_kernel(const float* logits, const int32_t* labels, float* dlogits, float* row_loss,
                                 int64_t N, int64_t K, int64_t ld, float one_minus_eps, float eps_over_k,
                                 float q_label, float q_other) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t n = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32; n < N; n += warps) {
    const float* z = logits + n * ld;  // (K)
    // Max-subtracted log-sum-exp: exp never overflows.
    float m = -INFINITY;
    for (int64_t k = lane; k < K; k += 32) m = fmaxf(m, z[k]);
    m = warp_max(m);
    float se = 0.0f, sz = 0.0f;
    for (int64_t k = lane; k < K; k += 32) {
      se = fp::add(se, expf(fp::sub(z[k], m)));
      sz = fp::add(sz, z[k]);
    }
    se = warp_sum(se);
    sz = warp_sum(sz);
    const float lse = fp::add(m, logf(se));
    const int32_t y = labels[n];
    const bool valid = y >= 0 && y < K;
    if (lane == 0) {
      // -sum_k q_k (z_k - lse) = lse - (1-eps) z_y - eps/K sum_k z_k
      row_loss[n] = valid ? fp::sub(fp::sub(lse, fp::mul(one_minus_eps, z[y])), fp::mul(eps_over_k, sz)) : NAN;
    }
    if (!dlogits) continue;
    float* g = dlogits + n * ld;
    const float rows = static_cast<float>(N);
    for (int64_t k = lane; k < K; k += 32) {
      const float q = k == y ? q_label : q_other;
      g[k] = valid ? fp::div(fp::sub(expf(fp::sub(z[k], lse)), q), rows) : NAN;
    }
    for (int64_t k = K + lane; k < ld; k += 32) g[k] = 0.0f;  // padding: outside the loss
  }
}

// One block: thread t sums rows t, t + 256, ... in double, then block_sum's fixed tree; loss = total / N.
__global__ void mean_kernel(const float* row_loss, float* loss, int64_t N) {
  DP_SHARED(double, part, [kThreads]);
  double s = 0;
  for (int64_t n = threadIdx.x; n < N; n += kThreads) s += row_loss[n];
  const double total = block_sum(part, s);
  if (threadIdx.x == 0) loss[0] = N > 0 ? static_cast<float>(total / static_cast<double>(N)) : 0.0f;
}

}  // namespace

cudaError_t softmax_xent(const float* logits, const int32_t* labels, float* dlogits, float* row_loss, float* loss,
                         int64_t N, int64_t K, double smoothing, cudaStream_t stream, int64_t ld) {
  if (N < 0 || K < 1 || (ld != 0 && ld < K) || !(smoothing >= 0 && smoothing <= 1)) return cudaErrorInvalidValue;
  if (N > 0) {
    // The smoothed target, as the CPU twin forms it: in double, here rounded once to float.
    const double off = smoothing / static_cast<double>(K);
    const unsigned blocks = grid_1d(N, kWarpsPerBlock);
    DP_LAUNCH(xent_rows_kernel, blocks, kWarpsPerBlock * 32, 0, stream)(
        logits, labels, dlogits, row_loss, N, K, ld > 0 ? ld : K, static_cast<float>(1.0 - smoothing),
        static_cast<float>(off), static_cast<float>(1.0 - smoothing + off), static_cast<float>(off));
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  DP_LAUNCH(mean_kernel, 1, kThreads, 0, stream)(row_loss, loss, N);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
