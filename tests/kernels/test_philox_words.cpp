// kernels/cpu/philox_words.h against base/philox.h's Philox::block, the scalar reference every
// dropout mask was drawn from word by word: the same 32-bit words, on every clone this CPU has
// (under ONEDNN_MAX_CPU_ISA=AVX2, tools/ci/isa.sh, the AVX2 and baseline ones), for starts inside
// a block and inside a batch of 16 blocks, tails of every length, and counters whose low 64 bits
// carry from their low word into their high one.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/philox.h"
#include "base/rng.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/philox_words.h"

namespace dp::kernels::cpu {
namespace {

// Word w of stream (key, stream), one Philox block per word.
uint32_t reference_word(uint64_t key, uint64_t stream, uint64_t w) {
  uint32_t b[4];
  Philox::block(key, w / 4, stream, b);
  return b[w % 4];
}

std::vector<CloneIsa> clones_here() {
  std::vector<CloneIsa> out;
  for (CloneIsa i : {CloneIsa::Avx512, CloneIsa::Avx2, CloneIsa::Baseline})
    if (i <= cpu_clone_isa()) out.push_back(i);
  return out;
}

// Runs the clone on out[1 .. n] of a buffer with a guard word on each side.
void expect_words(CloneIsa isa, uint64_t key, uint64_t stream, uint64_t first, int64_t n) {
  constexpr uint32_t kGuard = 0xA5A5A5A5u;
  std::vector<uint32_t> buf(static_cast<size_t>(n) + 2, kGuard);
  philox_words_on(isa, buf.data() + 1, n, first, key, stream);
  ASSERT_EQ(buf.front(), kGuard) << "wrote before out";
  ASSERT_EQ(buf.back(), kGuard) << "wrote past out[n - 1]";
  for (int64_t k = 0; k < n; ++k)
    ASSERT_EQ(buf[static_cast<size_t>(k) + 1], reference_word(key, stream, first + static_cast<uint64_t>(k)))
        << clone_isa_name(isa) << " key " << key << " stream " << stream << " first " << first << " n " << n
        << " k " << k;
}

TEST(PhiloxWords, EveryCloneDrawsPhiloxBlocksWordsForAnyStartAndLength) {
  const std::vector<uint64_t> firsts = {0, 1, 2, 3, 4, 5, 7, 13, 60, 63, 64, 65, 67, 127, 1001,
                                        (uint64_t{1} << 34) - 9,   // blocks 2^32 - 3 ..: the counter's carry
                                        (uint64_t{1} << 50) + 6, 0x123456789ABCull};
  const std::vector<int64_t> lengths = {0, 1, 2, 3, 4, 5, 15, 16, 17, 31, 63, 64, 65, 66, 127, 128, 129, 255, 257, 1000};
  const std::vector<std::pair<uint64_t, uint64_t>> keys = {
      {0, 0}, {1, 2}, {0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull}, {0x0123456789ABCDEFull, 0xFEDCBA9876543210ull}};
  for (CloneIsa isa : clones_here())
    for (auto [key, stream] : keys)
      for (uint64_t first : firsts)
        for (int64_t n : lengths) {
          expect_words(isa, key, stream, first, n);
          if (HasFatalFailure()) return;
        }
}

TEST(PhiloxWords, RandomKeysStreamsStartsAndLengths) {
  Rng rng(33, 7);
  for (CloneIsa isa : clones_here())
    for (int t = 0; t < 300; ++t) {
      const uint64_t key = rng.next_u64(), stream = rng.next_u64(), first = rng.next_u64() >> 8;
      expect_words(isa, key, stream, first, static_cast<int64_t>(rng.below(700)));
      if (HasFatalFailure()) return;
    }
}

// philox_words runs the clone of clone_isa(): a narrower limit picks the narrower clone, same words.
TEST(PhiloxWords, TheDispatchedCloneUnderEachLimitDrawsTheSameWords) {
  std::vector<uint32_t> out(333);
  for (CloneIsa isa : clones_here()) {
    ScopedCloneIsa limit(isa);
    philox_words(out.data(), 333, 41, 5, 6);
    for (int64_t k = 0; k < 333; ++k)
      ASSERT_EQ(out[static_cast<size_t>(k)], reference_word(5, 6, 41 + static_cast<uint64_t>(k)))
          << clone_isa_name(isa) << " k " << k;
  }
}

}  // namespace
}  // namespace dp::kernels::cpu
