#include "models/layers/dropout/dropout_ref.h"

#include "base/rng.h"

namespace dp::kernels::cpu {

namespace {
// out = keep ? in * scale : 0, in blocks of 4 elements (one Philox block each).
template <typename T>
void apply_mask(T* out, const T* in, int64_t n, double p, uint64_t seed, uint64_t stream) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    uint32_t r[4];
    Philox::block(seed, static_cast<uint64_t>(blk), stream, r);
    for (int64_t j = 0; j < 4 && blk * 4 + j < n; ++j) {
      const int64_t i = blk * 4 + j;
      // Same 24-bit uniform as Rng::uniform().
      const double u = static_cast<double>(r[j] >> 8) * (1.0 / 16777216.0);
      out[i] = u >= p ? in[i] * scale : T(0);
    }
  }
}
}  // namespace

template <typename T>
void dropout_forward(T* y, const T* x, int64_t n, double p, uint64_t seed, uint64_t stream) {
  apply_mask(y, x, n, p, seed, stream);
}

template <typename T>
void dropout_backward(T* dx, const T* dy, int64_t n, double p, uint64_t seed, uint64_t stream) {
  apply_mask(dx, dy, n, p, seed, stream);
}

template void dropout_forward<float>(float*, const float*, int64_t, double, uint64_t, uint64_t);
template void dropout_forward<double>(double*, const double*, int64_t, double, uint64_t, uint64_t);
template void dropout_backward<float>(float*, const float*, int64_t, double, uint64_t, uint64_t);
template void dropout_backward<double>(double*, const double*, int64_t, double, uint64_t, uint64_t);

}  // namespace dp::kernels::cpu
