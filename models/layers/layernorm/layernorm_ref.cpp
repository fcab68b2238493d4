#include "models/layers/layernorm/layernorm_ref.h"

#include <cmath>
#include <vector>

namespace dp::kernels::cpu {

namespace {
// Mean and 1 / sqrt(var + eps) of one row, two passes in f64 (as PyTorch's CPU kernel, Welford
// there: both are exact to f64 rounding for rows of f32 values).
template <typename T>
void row_stats(const T* x, int64_t C, double eps, double& mean, double& rstd) {
  double s = 0;
  for (int64_t c = 0; c < C; ++c) s += x[c];
  mean = s / static_cast<double>(C);
  double v = 0;
  for (int64_t c = 0; c < C; ++c) v += (x[c] - mean) * (x[c] - mean);
  rstd = 1.0 / std::sqrt(v / static_cast<double>(C) + eps);
}
}  // namespace

template <typename T>
void layernorm_forward(T* y, const T* x, const T* w, const T* b, int64_t M, int64_t C, double eps) {
#pragma omp parallel for schedule(static) if (M * C > (1 << 15))
  for (int64_t m = 0; m < M; ++m) {
    double mean, rstd;
    row_stats(x + m * C, C, eps, mean, rstd);
    for (int64_t c = 0; c < C; ++c) {
      const double v = (x[m * C + c] - mean) * rstd * w[c] + (b ? static_cast<double>(b[c]) : 0.0);
      y[m * C + c] = static_cast<T>(v);
    }
  }
}

template <typename T>
void layernorm_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int64_t M, int64_t C, double eps) {
  thread_local std::vector<double> stats;  // mean and rstd of every row: grown once, then reused
  stats.resize(static_cast<size_t>(2 * M));
  double *mean = stats.data(), *rstd = mean + M;
#pragma omp parallel for schedule(static) if (M * C > (1 << 15))
  for (int64_t m = 0; m < M; ++m) {
    row_stats(x + m * C, C, eps, mean[m], rstd[m]);
    if (!dx) continue;
    const T* xr = x + m * C;
    const T* g = dy + m * C;
    double sg = 0, sgx = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double gc = static_cast<double>(g[c]) * w[c];
      sg += gc;
      sgx += gc * (xr[c] - mean[m]) * rstd[m];
    }
    sg /= static_cast<double>(C), sgx /= static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (xr[c] - mean[m]) * rstd[m];
      dx[m * C + c] = static_cast<T>(rstd[m] * (static_cast<double>(g[c]) * w[c] - sg - xhat * sgx));
    }
  }
#pragma omp parallel for schedule(static) if (M * C > (1 << 15))
  for (int64_t c = 0; c < C; ++c) {
    double sw = 0, sb = 0;
    for (int64_t m = 0; m < M; ++m) {
      sw += static_cast<double>(dy[m * C + c]) * (x[m * C + c] - mean[m]) * rstd[m];
      sb += dy[m * C + c];
    }
    dw[c] += static_cast<T>(sw);
    if (db) db[c] += static_cast<T>(sb);
  }
}

template void layernorm_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, double);
template void layernorm_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t, double);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                        int64_t, double);
template void layernorm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         int64_t, int64_t, double);

}  // namespace dp::kernels::cpu
