// defines: dropout_forward / dropout_backward, inverted dropout with a counter-based mask, and
// the mask's pieces that the attention dropout shares (models/layers/attention/):
//   DropoutKeep          the keep rule and scale of one p
//   dropout_apply_words  a mask from words already drawn, applied
//   dropout_apply        the words drawn (kernels/cpu/philox_words.h) and applied, chunk by chunk
//
// Element i is kept iff the i-th uniform of Rng(seed, stream) (base/rng.h: Philox block
// i/4, word i%4, 24-bit uniform in [0, 1)) is >= p. Being a pure function of (seed, stream, i),
// the mask needs no storage: the backward recomputes it, any thread computes any element, and
// the result is the same whatever the thread count. The GPU kernels decide with the same integer
// compare (kernels/cuda/dropout_keep.h), so both draw the same mask.
#pragma once
#include <cstdint>

#include "kernels/cuda/dropout_keep.h"

namespace dp::kernels::cpu {

// Word r keeps its element iff (r >> 8) >= threshold, i.e. iff (r >> 8) 2^-24 >= p (exact:
// kernels/cuda/dropout_keep.h); a kept element is multiplied by scale = 1 / (1 - p) rounded to T.
template <typename T>
struct DropoutKeep {
  explicit DropoutKeep(double p) : threshold(cuda::dropout_keep_threshold(p)), scale(static_cast<T>(1.0 / (1.0 - p))) {}
  uint32_t threshold;
  T scale;
};

// out[k] (n) = words[k] keeps it ? in[k] * scale : 0 (in may be out).
template <typename T>
void dropout_apply_words(T* out, const T* in, int64_t n, const uint32_t* words, const DropoutKeep<T>& keep);

// out[k] (n) = in[k] masked as element first + k of stream (seed, stream) (in may be out).
template <typename T>
void dropout_apply(T* out, const T* in, int64_t n, uint64_t first, double p, uint64_t seed, uint64_t stream);

// y (n) = keep ? x / (1 - p) : 0
template <typename T>
void dropout_forward(T* y, const T* x, int64_t n, double p, uint64_t seed, uint64_t stream);
// dx (n) = keep ? dy / (1 - p) : 0
template <typename T>
void dropout_backward(T* dx, const T* dy, int64_t n, double p, uint64_t seed, uint64_t stream);

}  // namespace dp::kernels::cpu
