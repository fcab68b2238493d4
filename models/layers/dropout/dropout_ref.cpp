#include "models/layers/dropout/dropout_ref.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/philox_words.h"

namespace dp::kernels::cpu {

namespace {
// Words drawn at once: on the stack, in L1, many Philox batches per call.
constexpr int64_t kChunk = 256;
// Elements per OpenMP task of a long tensor (any split draws the same mask: word i is element i's).
constexpr int64_t kTask = 16 * kChunk;
}  // namespace

// A dropped element is +0: the product's bits and-ed with an all-zero mask. Written so, not as
// `keep ? in * scale : 0`, which GCC compiles to a branch around the product (it will not
// speculate a multiply that may trap) and leaves scalar: mispredicted on every dropped element.
template <typename T>
void dropout_apply_words(T* out, const T* in, int64_t n, const uint32_t* words, const DropoutKeep<T>& keep) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const uint32_t threshold = keep.threshold;
  const T scale = keep.scale;
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) {
    const T v = in[k] * scale;
    Bits b;
    std::memcpy(&b, &v, sizeof b);
    b &= Bits{0} - static_cast<Bits>(cuda::dropout_keep(words[k], threshold));
    std::memcpy(out + k, &b, sizeof b);
  }
}

template <typename T>
void dropout_apply(T* out, const T* in, int64_t n, uint64_t first, double p, uint64_t seed, uint64_t stream) {
  const DropoutKeep<T> keep(p);
  uint32_t words[kChunk];
  for (int64_t k = 0; k < n; k += kChunk) {
    const int64_t m = std::min(kChunk, n - k);
    philox_words(words, m, first + static_cast<uint64_t>(k), seed, stream);
    dropout_apply_words(out + k, in + k, m, words, keep);
  }
}

namespace {
// out = keep ? in * scale : 0 over a whole tensor, in tasks of kTask elements.
template <typename T>
void apply_mask(T* out, const T* in, int64_t n, double p, uint64_t seed, uint64_t stream) {
  const int64_t tasks = (n + kTask - 1) / kTask;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t k0 = t * kTask;
    dropout_apply(out + k0, in + k0, std::min(kTask, n - k0), static_cast<uint64_t>(k0), p, seed, stream);
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

template void dropout_apply_words<float>(float*, const float*, int64_t, const uint32_t*, const DropoutKeep<float>&);
template void dropout_apply_words<double>(double*, const double*, int64_t, const uint32_t*,
                                          const DropoutKeep<double>&);
template void dropout_apply<float>(float*, const float*, int64_t, uint64_t, double, uint64_t, uint64_t);
template void dropout_apply<double>(double*, const double*, int64_t, uint64_t, double, uint64_t, uint64_t);
template void dropout_forward<float>(float*, const float*, int64_t, double, uint64_t, uint64_t);
template void dropout_forward<double>(double*, const double*, int64_t, double, uint64_t, uint64_t);
template void dropout_backward<float>(float*, const float*, int64_t, double, uint64_t, uint64_t);
template void dropout_backward<double>(double*, const double*, int64_t, double, uint64_t, uint64_t);

}  // namespace dp::kernels::cpu
