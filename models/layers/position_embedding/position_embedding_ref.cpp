#include "models/layers/position_embedding/position_embedding_ref.h"

namespace dp::kernels::cpu {

template <typename T>
void position_embedding_forward(T* y, const T* x, const T* w, int64_t N, int64_t Tn, int64_t C) {
#pragma omp parallel for schedule(static) if (N * Tn * C > (1 << 15))
  for (int64_t r = 0; r < N * Tn; ++r) {
    const T* wr = w + (r % Tn) * C;
    const T* xr = x + r * C;
    T* yr = y + r * C;
    for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] + wr[c];
  }
}

template <typename T>
void position_embedding_backward(T* dw, const T* dy, int64_t N, int64_t Tn, int64_t C) {
#pragma omp parallel for schedule(static) if (N * Tn * C > (1 << 15))
  for (int64_t t = 0; t < Tn; ++t) {
    T* g = dw + t * C;
    for (int64_t n = 0; n < N; ++n) {
      const T* d = dy + (n * Tn + t) * C;
      for (int64_t c = 0; c < C; ++c) g[c] += d[c];
    }
  }
}

template void position_embedding_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t);
template void position_embedding_forward<double>(double*, const double*, const double*, int64_t, int64_t, int64_t);
template void position_embedding_backward<float>(float*, const float*, int64_t, int64_t, int64_t);
template void position_embedding_backward<double>(double*, const double*, int64_t, int64_t, int64_t);

}  // namespace dp::kernels::cpu
