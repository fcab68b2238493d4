// defines: dropout_forward / dropout_backward, inverted dropout with a counter-based mask.
//
// Element i is kept iff the i-th uniform of Rng(seed, stream) (base/rng.h: Philox block
// i/4, word i%4, 24-bit uniform in [0, 1)) is >= p. Being a pure function of (seed, stream, i),
// the mask needs no storage: the backward recomputes it, any thread computes any element, and
// the result is the same whatever the thread count.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// y (n) = keep ? x / (1 - p) : 0
template <typename T>
void dropout_forward(T* y, const T* x, int64_t n, double p, uint64_t seed, uint64_t stream);
// dx (n) = keep ? dy / (1 - p) : 0
template <typename T>
void dropout_backward(T* dx, const T* dy, int64_t n, double p, uint64_t seed, uint64_t stream);

}  // namespace dp::kernels::cpu
