#include "kernels/cpu/label_rank.h"

#include <algorithm>

namespace dp::kernels::cpu {

void label_ranks(const float* z, const int32_t* y, int64_t rows, int64_t K, int32_t cap, int32_t* out, int64_t ld) {
  const int64_t stride = ld > 0 ? ld : K;
#pragma omp parallel for schedule(static) if (rows * K > (1 << 20))
  for (int64_t r = 0; r < rows; ++r) {
    if (y[r] < 0 || y[r] >= K) {
      out[r] = cap;
      continue;
    }
    const float* row = z + r * stride;
    const float target = row[y[r]];
    int64_t higher = 0;
    for (int64_t k = 0; k < K; ++k) higher += row[k] > target;
    out[r] = static_cast<int32_t>(std::min<int64_t>(higher, cap));
  }
}

}  // namespace dp::kernels::cpu
