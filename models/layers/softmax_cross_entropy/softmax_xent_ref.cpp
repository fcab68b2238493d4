#include "models/layers/softmax_cross_entropy/softmax_xent_ref.h"

#include <cmath>
#include <vector>

namespace dp::kernels::cpu {

template <typename T>
double softmax_xent(const T* logits, const int32_t* labels, T* dlogits, int64_t N, int64_t K, double smoothing,
                    int64_t ld) {
  const int64_t stride = ld > 0 ? ld : K;
  std::vector<double> row_loss(static_cast<size_t>(N));  // (N)
#pragma omp parallel for schedule(static) if (N * K > (1 << 14))
  for (int64_t n = 0; n < N; ++n) {
    const T* z = logits + n * stride;  // (K) of a row of stride
    // Max-subtracted log-sum-exp: exp never overflows.
    double m = z[0];
    for (int64_t k = 1; k < K; ++k) m = std::max(m, static_cast<double>(z[k]));
    double se = 0, sz = 0;
    for (int64_t k = 0; k < K; ++k) se += std::exp(z[k] - m), sz += z[k];
    const double lse = m + std::log(se);
    const int32_t y = labels[n];
    // -sum_k q_k (z_k - lse) = lse - (1-eps) z_y - eps/K sum_k z_k
    row_loss[n] = lse - (1.0 - smoothing) * z[y] - smoothing / static_cast<double>(K) * sz;
    if (!dlogits) continue;
    T* g = dlogits + n * stride;
    const double off = smoothing / static_cast<double>(K);
    for (int64_t k = 0; k < K; ++k) {
      const double q = (k == y ? 1.0 - smoothing : 0.0) + off;
      g[k] = static_cast<T>((std::exp(z[k] - lse) - q) / static_cast<double>(N));
    }
    for (int64_t k = K; k < stride; ++k) g[k] = T(0);  // padding: outside the loss
  }
  double total = 0;
  for (int64_t n = 0; n < N; ++n) total += row_loss[n];
  return N > 0 ? total / static_cast<double>(N) : 0.0;
}

template double softmax_xent<float>(const float*, const int32_t*, float*, int64_t, int64_t, double, int64_t);
template double softmax_xent<double>(const double*, const int32_t*, double*, int64_t, int64_t, double, int64_t);

}  // namespace dp::kernels::cpu
