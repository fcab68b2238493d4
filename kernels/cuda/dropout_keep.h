// defines: dropout_keep_threshold / dropout_keep, the CPU twin's mask decision
// (models/layers/dropout/dropout_ref.h) in integers, for the dropout and attention-dropout
// kernels; the Philox words they decide on come from base/philox.h, the host's own generator.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace dp::kernels::cuda {

// The CPU twin keeps element i iff u >= p, with u = (r >> 8) * 2^-24 in double. Multiplying
// by 2^24 is exact, so that is (r >> 8) >= p * 2^24, i.e. (r >> 8) >= ceil(p * 2^24): the same
// mask with one integer compare and no double on the device. p in [0, 1).
inline uint32_t dropout_keep_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 16777216.0)); }
DP_HD bool dropout_keep(uint32_t r, uint32_t threshold) { return (r >> 8) >= threshold; }

}  // namespace dp::kernels::cuda
