#include "models/layers/embedding/embedding_ref.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace dp::kernels::cpu {

template <typename T>
void embedding_forward(T* y, const int32_t* ids, const T* w, int64_t M, int64_t D) {
#pragma omp parallel for schedule(static) if (M * D > (1 << 15))
  for (int64_t m = 0; m < M; ++m) std::memcpy(y + m * D, w + static_cast<int64_t>(ids[m]) * D, sizeof(T) * D);
}

template <typename T>
void embedding_backward(T* dw, const int32_t* ids, const T* dy, int64_t M, int64_t D) {
  // Column ranges of at least 16 elements (a cache line of f32) per thread.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), D / 16));
#pragma omp parallel for schedule(static) if (M * D > (1 << 15))
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t d0 = D * c / chunks, d1 = D * (c + 1) / chunks;
    for (int64_t m = 0; m < M; ++m) {
      T* row = dw + static_cast<int64_t>(ids[m]) * D;
      const T* g = dy + m * D;
      for (int64_t d = d0; d < d1; ++d) row[d] += g[d];
    }
  }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, int64_t, int64_t);
template void embedding_forward<double>(double*, const int32_t*, const double*, int64_t, int64_t);
template void embedding_backward<float>(float*, const int32_t*, const float*, int64_t, int64_t);
template void embedding_backward<double>(double*, const int32_t*, const double*, int64_t, int64_t);

}  // namespace dp::kernels::cpu
