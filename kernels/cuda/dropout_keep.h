// defines: dropout_keep_threshold / dropout_keep, the mask decision in integers of every dropout
// path: the dropout and attention-dropout kernels and, since issue 33, the CPU twins
// (models/layers/dropout/dropout_ref.h); the Philox words they decide on are base/philox.h's
// (on the CPU drawn many at a time by kernels/cpu/philox_words.h, the same words).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace dp::kernels::cuda {

// Element i is kept iff u >= p, with u = (r >> 8) * 2^-24 in double (the rule as first written). Multiplying
// by 2^24 is exact, so that is (r >> 8) >= p * 2^24, i.e. (r >> 8) >= ceil(p * 2^24): the same
// mask with one integer compare and no double on the device. p in [0, 1).
inline uint32_t dropout_keep_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 16777216.0)); }
DP_HD bool dropout_keep(uint32_t r, uint32_t threshold) { return (r >> 8) >= threshold; }

}  // namespace dp::kernels::cuda
