#include "models/layers/attention/attention_kernels.h"

#include <cmath>

#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "base/philox.h"
#include "kernels/cuda/dropout_keep.h"

namespace dp::kernels::cuda {
namespace {

// The attention dropout of the CPU twin (dropout_logical): element with logical index idx kept
// iff the idx-th uniform of Philox(seed, stream) is >= p, kept ones scaled by 1 / (1 - p).
struct Drop {
  uint64_t seed, stream;
  uint32_t threshold;  // 0: no dropout
  float scale;
  __device__ float operator()(float v, uint64_t idx) const {
    if (threshold == 0) return v;
    uint32_t r[4];
    Philox::block(seed, idx / 4, stream, r);
    return dropout_keep(r[idx % 4], threshold) ? v * scale : 0.0f;
  }
};

// Head h of sample n: the views of q, k, v (row stride 3C) and of att / datt (row stride C).
struct HeadView {
  int64_t qkv, out;  // offsets of q's row 0 and of att's row 0
};
__device__ HeadView head_view(int64_t nh, int64_t T, int64_t H, int64_t D) {
  const int64_t n = nh / H, h = nh % H, C = H * D;
  return {n * T * 3 * C + h * D, n * T * C + h * D};
}

// One thread per query row i of one (n, h): scores, max-subtracted softmax into P's row, then att.
__global__ void attn_forward_kernel(float* att, float* P, const float* qkv, int64_t N, int64_t T, int64_t H, int64_t D,
                                    float scale, Drop drop) {
  const int64_t C = H * D, ld = 3 * C, rows = N * H * T;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t nh = r / T, i = r % T;
    const HeadView hv = head_view(nh, T, H, D);
    const float *q = qkv + hv.qkv + i * ld, *k = qkv + hv.qkv + C, *v = qkv + hv.qkv + 2 * C;
    float* p = P + r * T;  // (n, h, i, :)
    float mx = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      float acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += q[d] * k[j * ld + d];
      p[j] = acc * scale;
      mx = fmaxf(mx, p[j]);
    }
    float sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += p[j] = expf(p[j] - mx);
    for (int64_t j = 0; j < T; ++j) p[j] = j <= i ? p[j] / sum : 0.0f;
    float* o = att + hv.out + i * C;
    for (int64_t d = 0; d < D; ++d) o[d] = 0;
    for (int64_t j = 0; j <= i; ++j) {
      const float pj = drop(p[j], uint64_t(r * T + j));
      for (int64_t d = 0; d < D; ++d) o[d] += pj * v[j * ld + d];
    }
  }
}

// One thread per query row i: row_dot_i = sum_j P_ij dP_ij, dq_i = scale sum_j P_ij (dP_ij - row_dot_i) k_j,
// with dP = dropout(datt_i . v_j).
__global__ void attn_dq_kernel(float* dqkv, float* row_dot, const float* datt, const float* qkv, const float* P,
                               int64_t N, int64_t T, int64_t H, int64_t D, float scale, Drop drop) {
  const int64_t C = H * D, ld = 3 * C, rows = N * H * T;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t nh = r / T, i = r % T;
    const HeadView hv = head_view(nh, T, H, D);
    const float *k = qkv + hv.qkv + C, *v = qkv + hv.qkv + 2 * C, *g = datt + hv.out + i * C, *p = P + r * T;
    auto dp = [&](int64_t j) {
      float acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += g[d] * v[j * ld + d];
      return drop(acc, uint64_t(r * T + j));
    };
    float dot = 0;
    for (int64_t j = 0; j <= i; ++j) dot += dp(j) * p[j];
    row_dot[r] = dot;
    float* dq = dqkv + hv.qkv + i * ld;
    for (int64_t d = 0; d < D; ++d) dq[d] = 0;
    for (int64_t j = 0; j <= i; ++j) {
      const float ds = p[j] * (dp(j) - dot);
      for (int64_t d = 0; d < D; ++d) dq[d] += ds * k[j * ld + d];
    }
    for (int64_t d = 0; d < D; ++d) dq[d] *= scale;
  }
}

// One thread per key row j: dv_j = sum_{i >= j} dropout(P_ij) datt_i,
// dk_j = scale sum_{i >= j} P_ij (dP_ij - row_dot_i) q_i.
__global__ void attn_dkv_kernel(float* dqkv, const float* row_dot, const float* datt, const float* qkv,
                                const float* P, int64_t N, int64_t T, int64_t H, int64_t D, float scale, Drop drop) {
  const int64_t C = H * D, ld = 3 * C, rows = N * H * T;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t nh = r / T, j = r % T;
    const HeadView hv = head_view(nh, T, H, D);
    const float *q = qkv + hv.qkv, *vj = qkv + hv.qkv + 2 * C + j * ld;
    float *dk = dqkv + hv.qkv + C + j * ld, *dv = dqkv + hv.qkv + 2 * C + j * ld;
    for (int64_t d = 0; d < D; ++d) dk[d] = 0, dv[d] = 0;
    for (int64_t i = j; i < T; ++i) {
      const float* g = datt + hv.out + i * C;
      const int64_t pi = (nh * T + i) * T + j;  // P[n, h, i, j], also its logical index
      const float pij = P[pi], pd = drop(pij, uint64_t(pi));
      float acc = 0;
      for (int64_t d = 0; d < D; ++d) {
        dv[d] += pd * g[d];
        acc += g[d] * vj[d];
      }
      const float ds = pij * (drop(acc, uint64_t(pi)) - row_dot[nh * T + i]);
      for (int64_t d = 0; d < D; ++d) dk[d] += ds * q[i * ld + d];
    }
    for (int64_t d = 0; d < D; ++d) dk[d] *= scale;
  }
}

bool bad_shape(int64_t N, int64_t T, int64_t H, int64_t D, const cpu::AttnDropout& drop) {
  return N < 0 || T < 0 || H < 1 || D < 1 || !(drop.p >= 0 && drop.p < 1);
}

Drop make_drop(const cpu::AttnDropout& d) {
  return {d.seed, d.stream, d.p == 0 ? 0u : dropout_keep_threshold(d.p), static_cast<float>(1.0 / (1.0 - d.p))};
}

float inv_sqrt(int64_t D) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(D))); }

}  // namespace

cudaError_t attention_forward(float* att, float* P, const float* qkv, int64_t N, int64_t T, int64_t H, int64_t D,
                              const cpu::AttnDropout& drop, cudaStream_t stream) {
  if (bad_shape(N, T, H, D, drop)) return cudaErrorInvalidValue;
  if (N * T == 0) return cudaSuccess;
  DP_LAUNCH(attn_forward_kernel, grid_1d(N * H * T), kThreads, 0, stream)(att, P, qkv, N, T, H, D, inv_sqrt(D),
                                                                          make_drop(drop));
  DP_RETURN_LAUNCH();
}

cudaError_t attention_backward(float* dqkv, float* row_dot, const float* datt, const float* qkv, const float* P,
                               int64_t N, int64_t T, int64_t H, int64_t D, const cpu::AttnDropout& drop,
                               cudaStream_t stream) {
  if (bad_shape(N, T, H, D, drop)) return cudaErrorInvalidValue;
  if (N * T == 0) return cudaSuccess;
  const unsigned blocks = grid_1d(N * H * T);
  DP_LAUNCH(attn_dq_kernel, blocks, kThreads, 0, stream)(dqkv, row_dot, datt, qkv, P, N, T, H, D, inv_sqrt(D),
                                                         make_drop(drop));
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  DP_LAUNCH(attn_dkv_kernel, blocks, kThreads, 0, stream)(dqkv, row_dot, datt, qkv, P, N, T, H, D, inv_sqrt(D),
                                                          make_drop(drop));
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
