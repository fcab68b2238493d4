#include "kernels/cpu/elementwise.h"

namespace dp::kernels::cpu {

template <typename T>
static void add_inplace_impl(T* dst, const T* src, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void add_inplace(float* dst, const float* src, int64_t n) { add_inplace_impl(dst, src, n); }
void add_inplace(double* dst, const double* src, int64_t n) { add_inplace_impl(dst, src, n); }

}  // namespace dp::kernels::cpu
