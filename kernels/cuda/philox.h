// defines: philox_block, Philox4x32-10 for host and device (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11), word for word the block function of base/rng.h
// (dp::Philox::block), and dropout_keep_threshold / dropout_keep, the CPU twin's mask decision
// (models/layers/dropout/dropout_ref.h) in integers.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace dp::kernels::cuda {

// The 4 x 32-bit block for (key, counter = ctr_hi:ctr_lo), as dp::Philox::block.
DP_HD void philox_block(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(ctr_lo), c1 = static_cast<uint32_t>(ctr_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(ctr_hi), c3 = static_cast<uint32_t>(ctr_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint32_t hi0 = fp::mulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = fp::mulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// The CPU twin keeps element i iff u >= p, with u = (r >> 8) * 2^-24 in double. Multiplying
// by 2^24 is exact, so that is (r >> 8) >= p * 2^24, i.e. (r >> 8) >= ceil(p * 2^24): the same
// mask with one integer compare and no double on the device. p in [0, 1).
inline uint32_t dropout_keep_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 16777216.0)); }
DP_HD bool dropout_keep(uint32_t r, uint32_t threshold) { return (r >> 8) >= threshold; }

}  // namespace dp::kernels::cuda
