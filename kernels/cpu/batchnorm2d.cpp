#include "kernels/cpu/batchnorm2d.h"

namespace dp::kernels::cpu {

template <typename T>
void batchnorm2d_stats(double* mean, double* var, const T* x, int64_t N, int64_t C, int64_t HW) {
  const double M = static_cast<double>(N * HW);
#pragma omp parallel for schedule(static) if (N * C * HW > (1 << 14))
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* p = x + (n * C + c) * HW;  // (HW)
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < HW; ++i) s += p[i];
    }
    const double m = s / M;
    double ss = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* p = x + (n * C + c) * HW;
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < HW; ++i) ss += (p[i] - m) * (p[i] - m);
    }
    mean[c] = m;
    var[c] = ss / M;
  }
}

template <typename T>
void batchnorm2d_forward(T* y, const T* x, const T* w, const T* b, const double* mean, const double* invstd,
                         int64_t N, int64_t C, int64_t HW) {
#pragma omp parallel for collapse(2) schedule(static) if (N * C * HW > (1 << 14))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double scale = invstd[c] * w[c], shift = b[c] - mean[c] * scale;
      const T* p = x + (n * C + c) * HW;
      T* q = y + (n * C + c) * HW;
#pragma omp simd
      for (int64_t i = 0; i < HW; ++i) q[i] = static_cast<T>(p[i] * scale + shift);
    }
}

template <typename T>
void batchnorm2d_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, const double* mean,
                          const double* invstd, bool batch_stats, int64_t N, int64_t C, int64_t HW) {
  const double M = static_cast<double>(N * HW);
#pragma omp parallel for schedule(static) if (N * C * HW > (1 << 14))
  for (int64_t c = 0; c < C; ++c) {
    const double m = mean[c], is = invstd[c];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* g = dy + (n * C + c) * HW;
      const T* p = x + (n * C + c) * HW;
#pragma omp simd reduction(+ : sum_dy, sum_dy_xhat)
      for (int64_t i = 0; i < HW; ++i) {
        sum_dy += g[i];
        sum_dy_xhat += g[i] * ((p[i] - m) * is);
      }
    }
    dw[c] += static_cast<T>(sum_dy_xhat);
    db[c] += static_cast<T>(sum_dy);
    if (!dx) continue;
    const double k = w[c] * is;
    const double mean_dy = batch_stats ? sum_dy / M : 0, mean_dy_xhat = batch_stats ? sum_dy_xhat / M : 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* g = dy + (n * C + c) * HW;
      const T* p = x + (n * C + c) * HW;
      T* q = dx + (n * C + c) * HW;
#pragma omp simd
      for (int64_t i = 0; i < HW; ++i) q[i] = static_cast<T>(k * (g[i] - mean_dy - (p[i] - m) * is * mean_dy_xhat));
    }
  }
}

#define DP_INSTANTIATE(T)                                                                                     \
  template void batchnorm2d_stats<T>(double*, double*, const T*, int64_t, int64_t, int64_t);                 \
  template void batchnorm2d_forward<T>(T*, const T*, const T*, const T*, const double*, const double*, int64_t, \
                                       int64_t, int64_t);                                                     \
  template void batchnorm2d_backward<T>(T*, T*, T*, const T*, const T*, const T*, const double*, const double*, \
                                        bool, int64_t, int64_t, int64_t);
DP_INSTANTIATE(float)
DP_INSTANTIATE(double)
#undef DP_INSTANTIATE

}  // namespace dp::kernels::cpu
