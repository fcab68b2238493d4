// defines: the one order in which the global gradient norm is summed, and the clip coefficient:
// the CPU twin (kernels/cpu/grad_norm.h) and the CUDA kernels (kernels/cuda/grad_norm.h) both
// follow it, so both give the same bits for any thread count (a deterministic reduction).
//
// Order: the flat arena is cut into chunks of kNormChunk elements. In chunk c, "thread" j of
// kNormThreads sums x[i]^2 for i = j, j + kNormThreads, ... in double (each square is exact in
// double: a float has 24 significant bits); the kNormThreads sums are folded pairwise, halving
// (t[j] += t[j + w] for w = kNormThreads / 2, ..., 1). The chunks' sums are then reduced the same
// way by one block: thread j sums partial[j], partial[j + kNormThreads], ..., then the same fold.
// Clipping: torch.nn.utils.clip_grad_norm_'s coefficient max_norm / (norm + 1e-6), applied only
// when below 1 (torch multiplies by the coefficient clamped to 1, the same values).
#pragma once
#include <cstdint>

#include "kernels/host_device.h"

namespace dp::kernels {

inline constexpr int kNormThreads = 256;
inline constexpr int64_t kNormChunk = int64_t{kNormThreads} * 16;

// The factor the gradients are multiplied by: float(max_norm / (sqrt(sum_sq) + 1e-6)) when that
// is below 1, else 1 (no change). In double: sqrt and division are correctly rounded on both the
// host and the device.
DP_HD float clip_coefficient(double sum_sq, double max_norm) {
  const double c = max_norm / (::sqrt(sum_sq) + 1e-6);
  return c < 1.0 ? static_cast<float>(c) : 1.0f;
}

}  // namespace dp::kernels
