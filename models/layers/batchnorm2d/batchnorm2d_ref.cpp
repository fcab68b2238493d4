#include "models/layers/batchnorm2d/batchnorm2d_ref.h"

#include <vector>

namespace dp::kernels::cpu {

// Each channel's values are summed plane by plane in n order, with `omp simd` partial sums: a
// fixed order, whatever the thread count.
template <typename T>
void batchnorm2d_channel_sum(double* sum, const T* x, int64_t N, int64_t C, int64_t HW) {
#pragma omp parallel for schedule(static) if (N * C * HW > (1 << 14))
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* p = x + (n * C + c) * HW;  // (HW)
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < HW; ++i) s += p[i];
    }
    sum[c] = s;
  }
}

template <typename T>
void batchnorm2d_channel_sqdev(double* sqdev, const T* x, const double* mean, int64_t N, int64_t C, int64_t HW) {
#pragma omp parallel for schedule(static) if (N * C * HW > (1 << 14))
  for (int64_t c = 0; c < C; ++c) {
    const double m = mean[c];
    double ss = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* p = x + (n * C + c) * HW;
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < HW; ++i) ss += (p[i] - m) * (p[i] - m);
    }
    sqdev[c] = ss;
  }
}

template <typename T>
void batchnorm2d_stats(double* mean, double* var, const T* x, int64_t N, int64_t C, int64_t HW) {
  const double M = static_cast<double>(N * HW);
  batchnorm2d_channel_sum(mean, x, N, C, HW);
  for (int64_t c = 0; c < C; ++c) mean[c] /= M;
  batchnorm2d_channel_sqdev(var, x, mean, N, C, HW);
  for (int64_t c = 0; c < C; ++c) var[c] /= M;
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
void batchnorm2d_grad_sums(double* sum_dy, double* sum_dy_xhat, const T* dy, const T* x, const double* mean,
                           const double* invstd, int64_t N, int64_t C, int64_t HW) {
#pragma omp parallel for schedule(static) if (N * C * HW > (1 << 14))
  for (int64_t c = 0; c < C; ++c) {
    const double m = mean[c], is = invstd[c];
    double s1 = 0, s2 = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* g = dy + (n * C + c) * HW;
      const T* p = x + (n * C + c) * HW;
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t i = 0; i < HW; ++i) {
        s1 += g[i];
        s2 += g[i] * ((p[i] - m) * is);
      }
    }
    sum_dy[c] = s1;
    sum_dy_xhat[c] = s2;
  }
}

template <typename T>
void batchnorm2d_grad_input(T* dx, const T* dy, const T* x, const T* w, const double* mean, const double* invstd,
                            const double* mean_dy, const double* mean_dy_xhat, int64_t N, int64_t C, int64_t HW) {
#pragma omp parallel for collapse(2) schedule(static) if (N * C * HW > (1 << 14))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double m = mean[c], is = invstd[c], k = w[c] * is, a = mean_dy[c], b = mean_dy_xhat[c];
      const T* g = dy + (n * C + c) * HW;
      const T* p = x + (n * C + c) * HW;
      T* q = dx + (n * C + c) * HW;
#pragma omp simd
      for (int64_t i = 0; i < HW; ++i) q[i] = static_cast<T>(k * (g[i] - a - (p[i] - m) * is * b));
    }
}

template <typename T>
void batchnorm2d_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, const double* mean,
                          const double* invstd, bool batch_stats, int64_t N, int64_t C, int64_t HW) {
  const double M = static_cast<double>(N * HW);
  std::vector<double> sum_dy(C), sum_dy_xhat(C);
  batchnorm2d_grad_sums(sum_dy.data(), sum_dy_xhat.data(), dy, x, mean, invstd, N, C, HW);
  for (int64_t c = 0; c < C; ++c) {
    dw[c] += static_cast<T>(sum_dy_xhat[c]);
    db[c] += static_cast<T>(sum_dy[c]);
    // Running statistics (eval) are constants: no path through them.
    sum_dy[c] = batch_stats ? sum_dy[c] / M : 0;
    sum_dy_xhat[c] = batch_stats ? sum_dy_xhat[c] / M : 0;
  }
  if (dx) batchnorm2d_grad_input(dx, dy, x, w, mean, invstd, sum_dy.data(), sum_dy_xhat.data(), N, C, HW);
}

#define DP_INSTANTIATE(T)                                                                                     \
  template void batchnorm2d_stats<T>(double*, double*, const T*, int64_t, int64_t, int64_t);                 \
  template void batchnorm2d_channel_sum<T>(double*, const T*, int64_t, int64_t, int64_t);                    \
  template void batchnorm2d_channel_sqdev<T>(double*, const T*, const double*, int64_t, int64_t, int64_t);   \
  template void batchnorm2d_grad_sums<T>(double*, double*, const T*, const T*, const double*, const double*,  \
                                         int64_t, int64_t, int64_t);                                          \
  template void batchnorm2d_grad_input<T>(T*, const T*, const T*, const T*, const double*, const double*,    \
                                          const double*, const double*, int64_t, int64_t, int64_t);          \
  template void batchnorm2d_forward<T>(T*, const T*, const T*, const T*, const double*, const double*, int64_t, \
                                       int64_t, int64_t);                                                     \
  template void batchnorm2d_backward<T>(T*, T*, T*, const T*, const T*, const T*, const double*, const double*, \
                                        bool, int64_t, int64_t, int64_t);
DP_INSTANTIATE(float)
DP_INSTANTIATE(double)
#undef DP_INSTANTIATE

}  // namespace dp::kernels::cpu
