// base/philox.h: the one Philox4x32-10, which the host's Rng and the device kernels (dropout,
// attention dropout, synthetic data) all call. Its blocks against the published known answers
// (Salmon et al., SC'11; the Random123 distribution's kat_vectors), so a change to the one copy
// cannot move host and device together away from the algorithm; and Rng's words in block order.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "base/philox.h"
#include "base/rng.h"

namespace dp {
namespace {

// Counter words c0..c3 are ctr_lo's low and high halves, then ctr_hi's; key words k0, k1 key's.
TEST(Philox, BlocksEqualThePublishedKnownAnswers) {
  struct Kat {
    uint64_t key, ctr_lo, ctr_hi;
    std::array<uint32_t, 4> want;
  };
  const Kat kats[] = {
      {0, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}, {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      // The digits of pi: counter 243f6a88 85a308d3 13198a2e 03707344, key a4093822 299f31d0.
      {0x299f31d0a4093822u, 0x85a308d3243f6a88u, 0x0370734413198a2eu,
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    std::array<uint32_t, 4> got{};
    Philox::block(k.key, k.ctr_lo, k.ctr_hi, got.data());
    EXPECT_EQ(got, k.want) << "key " << std::hex << k.key << " ctr " << k.ctr_hi << ":" << k.ctr_lo;
  }
}

// Rng(seed, stream) reads block (seed, counter 0, 1, ..., stream) word by word: the order the
// kernels reproduce by position (word w = word w % 4 of block w / 4).
TEST(Philox, RngDrawsTheBlocksWordsInOrder) {
  Rng r(7, kStreamDropout);
  for (uint64_t b = 0; b < 3; ++b) {
    uint32_t want[4];
    Philox::block(7, b, kStreamDropout, want);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(r.next_u32(), want[j]) << "block " << b << " word " << j;
  }
}

}  // namespace
}  // namespace dp
