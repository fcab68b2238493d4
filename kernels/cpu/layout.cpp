#include "kernels/cpu/layout.h"

#include <algorithm>

namespace dp::kernels::cpu {

namespace {
// dst (N, cols, rows) = per-sample transpose of src (N, rows, cols), in 32x32 tiles for the cache.
template <typename T>
void transpose_batched(T* dst, const T* src, int64_t N, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  const int64_t rt = (rows + kTile - 1) / kTile;
#pragma omp parallel for collapse(2) schedule(static) if (N * rows * cols > (1 << 15))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t r0 = 0; r0 < rt * kTile; r0 += kTile) {
      const T* s = src + n * rows * cols;
      T* d = dst + n * rows * cols;
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) d[c * rows + r] = s[r * cols + c];
      }
    }
}
}  // namespace

template <typename T>
void nchw_to_nhwc(T* dst, const T* src, int64_t N, int64_t C, int64_t HW) {
  transpose_batched(dst, src, N, C, HW);
}

template <typename T>
void nhwc_to_nchw(T* dst, const T* src, int64_t N, int64_t C, int64_t HW) {
  transpose_batched(dst, src, N, HW, C);
}

template void nchw_to_nhwc<float>(float*, const float*, int64_t, int64_t, int64_t);
template void nchw_to_nhwc<double>(double*, const double*, int64_t, int64_t, int64_t);
template void nhwc_to_nchw<float>(float*, const float*, int64_t, int64_t, int64_t);
template void nhwc_to_nchw<double>(double*, const double*, int64_t, int64_t, int64_t);

}  // namespace dp::kernels::cpu
