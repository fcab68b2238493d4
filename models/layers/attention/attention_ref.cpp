#include "models/layers/attention/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/layers/dropout/dropout_ref.h"

namespace dp::kernels::cpu {

template <typename T>
void dropout_logical(T* out, const T* in, int64_t n, uint64_t first, const AttnDropout& d) {
  if (d.p == 0) {
    std::copy(in, in + n, out);
    return;
  }
  dropout_apply(out, in, n, first, d.p, d.seed, d.stream);
}

namespace {

// This thread's buffer of n elements (zeroed): grown once, then reused, so a step allocates nothing.
template <typename T>
T* task_buffer(int slot, int64_t n) {
  thread_local std::vector<T> bufs[3];
  std::vector<T>& b = bufs[slot];
  b.assign(static_cast<size_t>(n), T(0));
  return b.data();
}

// One (n, h): the views of q, k, v (row stride 3C) and of att (row stride C).
template <typename T>
struct Head {
  const T *q, *k, *v;
  int64_t ld, ldo;
};

template <typename T>
void head_forward(T* att, T* P, const Head<T>& hd, int64_t Tn, int64_t D, uint64_t index0, const AttnDropout& drop) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  double* s = task_buffer<double>(0, Tn);
  T* pd = task_buffer<T>(1, Tn);
  for (int64_t i = 0; i < Tn; ++i) {
    double mx = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(hd.q[i * hd.ld + d]) * hd.k[j * hd.ld + d];
      s[j] = acc * scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += s[j] = std::exp(s[j] - mx);
    T* row = P + i * Tn;
    for (int64_t j = 0; j < Tn; ++j) row[j] = j <= i ? static_cast<T>(s[j] / sum) : T(0);
    dropout_logical(pd, row, i + 1, index0 + static_cast<uint64_t>(i * Tn), drop);
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0;
      for (int64_t j = 0; j <= i; ++j) acc += static_cast<double>(pd[j]) * hd.v[j * hd.ld + d];
      att[i * hd.ldo + d] = static_cast<T>(acc);
    }
  }
}

// dq, dk, dv (row stride 3C) of one head; dk and dv accumulate over the query rows.
template <typename T>
void head_backward(T* dq, T* dk, T* dv, const T* datt, const T* P, const Head<T>& hd, int64_t Tn, int64_t D,
                   uint64_t index0, const AttnDropout& drop) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  double* dk_acc = task_buffer<double>(0, Tn * D);
  double* dv_acc = task_buffer<double>(1, Tn * D);
  T* pd = task_buffer<T>(2, 3 * Tn);  // dropped P, d(dropped P), dP of one row
  T *dpd = pd + Tn, *dp = pd + 2 * Tn;
  for (int64_t i = 0; i < Tn; ++i) {
    const T* prow = P + i * Tn;
    const T* g = datt + i * hd.ldo;
    dropout_logical(pd, prow, i + 1, index0 + static_cast<uint64_t>(i * Tn), drop);
    for (int64_t j = 0; j <= i; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(g[d]) * hd.v[j * hd.ld + d];
      dpd[j] = static_cast<T>(acc);
      for (int64_t d = 0; d < D; ++d) dv_acc[j * D + d] += static_cast<double>(pd[j]) * g[d];
    }
    dropout_logical(dp, dpd, i + 1, index0 + static_cast<uint64_t>(i * Tn), drop);
    double dot = 0;
    for (int64_t j = 0; j <= i; ++j) dot += static_cast<double>(dp[j]) * prow[j];
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0;
      for (int64_t j = 0; j <= i; ++j) acc += prow[j] * (dp[j] - dot) * hd.k[j * hd.ld + d];
      dq[i * hd.ld + d] = static_cast<T>(acc * scale);
    }
    for (int64_t j = 0; j <= i; ++j) {
      const double ds = prow[j] * (dp[j] - dot) * scale;
      for (int64_t d = 0; d < D; ++d) dk_acc[j * D + d] += ds * hd.q[i * hd.ld + d];
    }
  }
  for (int64_t j = 0; j < Tn; ++j)
    for (int64_t d = 0; d < D; ++d) {
      dk[j * hd.ld + d] = static_cast<T>(dk_acc[j * D + d]);
      dv[j * hd.ld + d] = static_cast<T>(dv_acc[j * D + d]);
    }
}

}  // namespace

template <typename T>
void attention_forward(T* att, T* P, const T* qkv, int64_t N, int64_t Tn, int64_t H, int64_t D,
                       const AttnDropout& drop) {
  const int64_t C = H * D;
#pragma omp parallel for schedule(static)
  for (int64_t nh = 0; nh < N * H; ++nh) {
    const int64_t n = nh / H, h = nh % H;
    const T* base = qkv + n * Tn * 3 * C + h * D;
    const Head<T> hd{base, base + C, base + 2 * C, 3 * C, C};
    head_forward(att + n * Tn * C + h * D, P + nh * Tn * Tn, hd, Tn, D, static_cast<uint64_t>(nh * Tn * Tn), drop);
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* datt, const T* qkv, const T* P, int64_t N, int64_t Tn, int64_t H,
                        int64_t D, const AttnDropout& drop) {
  const int64_t C = H * D;
#pragma omp parallel for schedule(static)
  for (int64_t nh = 0; nh < N * H; ++nh) {
    const int64_t n = nh / H, h = nh % H;
    const T* base = qkv + n * Tn * 3 * C + h * D;
    T* dbase = dqkv + n * Tn * 3 * C + h * D;
    const Head<T> hd{base, base + C, base + 2 * C, 3 * C, C};
    head_backward(dbase, dbase + C, dbase + 2 * C, datt + n * Tn * C + h * D, P + nh * Tn * Tn, hd, Tn, D,
                  static_cast<uint64_t>(nh * Tn * Tn), drop);
  }
}

template void dropout_logical<float>(float*, const float*, int64_t, uint64_t, const AttnDropout&);
template void dropout_logical<double>(double*, const double*, int64_t, uint64_t, const AttnDropout&);
template void attention_forward<float>(float*, float*, const float*, int64_t, int64_t, int64_t, int64_t,
                                       const AttnDropout&);
template void attention_forward<double>(double*, double*, const double*, int64_t, int64_t, int64_t, int64_t,
                                        const AttnDropout&);
template void attention_backward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                        int64_t, const AttnDropout&);
template void attention_backward<double>(double*, const double*, const double*, const double*, int64_t, int64_t,
                                         int64_t, int64_t, const AttnDropout&);

}  // namespace dp::kernels::cpu
