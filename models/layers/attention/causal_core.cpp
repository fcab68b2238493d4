#include "models/layers/attention/causal_core.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/isa.h"
#include "kernels/host_device.h"
#include "kernels/cpu/exp_nonpositive.h"

namespace dp::kernels::cpu {

CausalBlocks::CausalBlocks(int64_t t) : T(t), count((t + kBlockRows - 1) / kBlockRows) {
  for (int64_t b = 0; b < count; ++b) {
    offset.push_back(packed);
    packed += rows(b) * keys(b);
  }
}

int64_t CausalBlocks::rows(int64_t b) const { return std::min(kBlockRows, T - first(b)); }

namespace {

// Row of block scores s (length L): softmax over [0, n), zeros in [n, L). The loops are OpenMP
// simd loops: the max and the sum reduce in vector lanes (a fixed order for the build, the same
// on any thread count), the exponentials vectorise. Compiled for AVX-512, AVX2 and the baseline,
// picked per process (DP_VECTOR_CLONES, kernels/cpu/isa.h): 16 lanes where the CPU has them, so the
// sums' last bits depend on the clone.
[[gnu::always_inline]] inline void softmax_causal_row_body(float* s, int64_t n, int64_t L) {
  float mx = s[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 1; j < n; ++j) mx = std::max(mx, s[j]);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) s[j] = exp_nonpositive(s[j] - mx);
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += s[j];
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
  for (int64_t j = n; j < L; ++j) s[j] = 0.0f;
}
DP_VECTOR_CLONES(void, softmax_causal_row, (float* s, int64_t n, int64_t L), (s, n, L))

// dS = P (dP - rowdot(dP, P)) in place of dP, for one block row.
[[gnu::always_inline]] inline void softmax_backward_row_body(float* dp, const float* p, int64_t L) {
  float dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < L; ++j) dot += dp[j] * p[j];
#pragma omp simd
  for (int64_t j = 0; j < L; ++j) dp[j] = p[j] * (dp[j] - dot);
}
DP_VECTOR_CLONES(void, softmax_backward_row, (float* dp, const float* p, int64_t L), (dp, p, L))

// The pointers of one (n, h).
struct HeadView {
  const float *q, *k, *v;  // row stride 3C
  int64_t ld, ldo;         // 3C, C
};

HeadView head_view(const float* qkv, int64_t n, int64_t h, int64_t T, int64_t C, int64_t D) {
  const float* base = qkv + n * T * 3 * C + h * D;
  return {base, base + C, base + 2 * C, 3 * C, C};
}

// Row-major C = alpha op(A) op(B) + beta C on the calling thread (each task is one (n, h)).
void sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_in_task(ta == 'T', tb == 'T', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

void causal_forward(float* att, float* P, const float* qkv, int64_t N, int64_t H, int64_t D, const CausalBlocks& cb,
                    const AttnDropout& drop, float* scratch) {
  const int64_t T = cb.T, C = H * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
#pragma omp parallel for schedule(static)
  for (int64_t nh = 0; nh < N * H; ++nh) {
    const int64_t n = nh / H, h = nh % H;
    const HeadView hv = head_view(qkv, n, h, T, C, D);
    float* out = att + n * T * C + h * D;
    // No scratch without dropout (null: no offset may be applied to it).
    float* pd = drop.p > 0 ? scratch + omp_get_thread_num() * CausalBlocks::kBlockRows * T : nullptr;
    for (int64_t b = 0; b < cb.count; ++b) {
      const int64_t r0 = cb.first(b), rows = cb.rows(b), L = cb.keys(b);
      float* S = P + nh * cb.packed + cb.offset[b];
      sgemm('N', 'T', rows, L, D, scale, hv.q + r0 * hv.ld, hv.ld, hv.k, hv.ld, 0.0f, S, L);
      for (int64_t i = 0; i < rows; ++i) softmax_causal_row(S + i * L, r0 + i + 1, L);
      const float* use = S;
      if (drop.p > 0) {
        for (int64_t i = 0; i < rows; ++i)
          dropout_logical(pd + i * L, S + i * L, L, static_cast<uint64_t>((nh * T + r0 + i) * T), drop);
        use = pd;
      }
      sgemm('N', 'N', rows, D, L, 1.0f, use, L, hv.v, hv.ld, 0.0f, out + r0 * hv.ldo, hv.ldo);
    }
  }
}

void causal_backward(float* dqkv, const float* datt, const float* qkv, const float* P, int64_t N, int64_t H,
                     int64_t D, const CausalBlocks& cb, const AttnDropout& drop, float* scratch) {
  const int64_t T = cb.T, C = H * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
#pragma omp parallel for schedule(static)
  for (int64_t nh = 0; nh < N * H; ++nh) {
    const int64_t n = nh / H, h = nh % H;
    const HeadView hv = head_view(qkv, n, h, T, C, D);
    float* dq = dqkv + n * T * 3 * C + h * D;
    float *dk = dq + C, *dv = dq + 2 * C;
    const float* g = datt + n * T * C + h * D;
    float* dp = scratch + omp_get_thread_num() * 2 * CausalBlocks::kBlockRows * T;
    float* pd = dp + CausalBlocks::kBlockRows * T;
    // The last block reaches every key: it writes dk and dv whole (beta 0), the others add.
    for (int64_t b = cb.count - 1; b >= 0; --b) {
      const int64_t r0 = cb.first(b), rows = cb.rows(b), L = cb.keys(b);
      const float beta = b == cb.count - 1 ? 0.0f : 1.0f;
      const float* S = P + nh * cb.packed + cb.offset[b];
      const float* ps = S;
      sgemm('N', 'T', rows, L, D, 1.0f, g + r0 * hv.ldo, hv.ldo, hv.v, hv.ld, 0.0f, dp, L);  // d(dropped P)
      if (drop.p > 0) {
        for (int64_t i = 0; i < rows; ++i) {
          const uint64_t first = static_cast<uint64_t>((nh * T + r0 + i) * T);
          dropout_logical(dp + i * L, dp + i * L, L, first, drop);
          dropout_logical(pd + i * L, S + i * L, L, first, drop);
        }
        ps = pd;
      }
      sgemm('T', 'N', L, D, rows, 1.0f, ps, L, g + r0 * hv.ldo, hv.ldo, beta, dv, hv.ld);
      for (int64_t i = 0; i < rows; ++i) softmax_backward_row(dp + i * L, S + i * L, L);
      sgemm('N', 'N', rows, D, L, scale, dp, L, hv.k, hv.ld, 0.0f, dq + r0 * hv.ld, hv.ld);
      sgemm('T', 'N', L, D, rows, scale, dp, L, hv.q + r0 * hv.ld, hv.ld, beta, dk, hv.ld);
    }
  }
}

}  // namespace dp::kernels::cpu
