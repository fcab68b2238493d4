// defines: Philox, the counter-based Philox4x32-10 block function (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC'11): (64-bit key, 128-bit counter) -> 4 x 32 bits.
// The one copy, for the host (Rng, base/rng.h; the CPU twins' dropout masks) and the device (the
// dropout, attention-dropout and synthetic-data kernels), so a mask or a synthetic value drawn on
// the GPU is the CPU's bit for bit. Integer arithmetic only: nothing for a compiler to reorder.
#pragma once
#include <cstdint>

#include "base/host_device.h"

namespace dp {

struct Philox {
  // The 4 x 32-bit block for (key, counter = ctr_hi:ctr_lo).
  static DP_HD void block(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]) {
    uint32_t c0 = static_cast<uint32_t>(ctr_lo), c1 = static_cast<uint32_t>(ctr_lo >> 32);
    uint32_t c2 = static_cast<uint32_t>(ctr_hi), c3 = static_cast<uint32_t>(ctr_hi >> 32);
    uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
    for (int r = 0; r < 10; ++r) {
      // One round: two 32 x 32 -> 64-bit products, their halves mixed with the other words and the key.
      const uint32_t hi0 = mulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
      const uint32_t hi1 = mulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
      const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
      c0 = n0;
      c1 = lo1;
      c2 = n2;
      c3 = lo0;
      k0 += 0x9E3779B9u;  // the key schedule's Weyl sequence (golden ratio, sqrt(3) - 1)
      k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }

 private:
  // The high 32 bits of a * b: the device's one-instruction __umulhi, the host's 64-bit product.
  static DP_HD uint32_t mulhi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
  }
};

}  // namespace dp
