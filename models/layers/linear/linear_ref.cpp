#include "models/layers/linear/linear_ref.h"

#include <algorithm>

#include "kernels/cpu/blas.h"

namespace dp::kernels::cpu {

template <typename T>
void linear_forward(T* y, const T* x, const T* w, const T* b, int64_t N, int64_t I, int64_t O, int64_t ld) {
  if (N == 0) return;
  const int64_t L = ld > 0 ? ld : O;
  gemm(false, true, N, O, I, T(1), x, I, w, I, T(0), y, L);
  if (L > O)
    for (int64_t n = 0; n < N; ++n) std::fill(y + n * L + O, y + (n + 1) * L, T(0));  // the padding
  if (!b) return;
#pragma omp parallel for schedule(static) if (N * O > (1 << 15))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) y[n * L + o] += b[o];
}

template <typename T>
void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int64_t N, int64_t I, int64_t O,
                     int64_t ld) {
  if (N == 0) return;
  const int64_t L = ld > 0 ? ld : O;
  gemm(true, false, O, I, N, T(1), dy, L, x, I, T(1), dw, I);
  if (db) {
    // One thread per output feature, samples summed in order: bitwise reproducible.
#pragma omp parallel for schedule(static) if (N * O > (1 << 15))
    for (int64_t o = 0; o < O; ++o) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) s += dy[n * L + o];
      db[o] += static_cast<T>(s);
    }
  }
  if (dx) gemm(false, false, N, I, O, T(1), dy, L, w, I, T(0), dx, I);
}

template void linear_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                    int64_t);
template void linear_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t, int64_t,
                                     int64_t);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                     int64_t, int64_t, int64_t);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*, int64_t,
                                      int64_t, int64_t, int64_t);

}  // namespace dp::kernels::cpu
