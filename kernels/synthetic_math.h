// defines: the element math of the synthetic data set (data.dataset = "synthetic"), the one copy
// that the CPU generator (runtime/data/synthetic.cpp) and the GPU one (kernels/cuda/synthetic.h)
// both run, so a batch made on the GPU holds the CPU's values bit for bit:
//   synthetic_stream    the Philox stream of a sample or of a class pattern (keyed_rng's mapping)
//   synthetic_word      word w of a stream, by position (what the CPU's Rng draws w-th)
//   synthetic_label     a sample's label and how many words its draw used (Rng::below)
//   synthetic_uniform   a word as Rng::uniform's float in [0, 1)
//   synthetic_pixel     0.6 * pattern + 0.4 * noise, each operation rounded once (fp::)
//   synthetic_token_of  a word as a token in [0, vocab) (multiply-shift)
//   synthetic_token     token j of a sample's token window, by position
//
// Sample i of seed s (runtime/data/synthetic.cpp): its stream is keyed_rng(s, kStreamData, i) at
// epoch 0, i.e. Philox key s, counter high 64 bits (kStreamData << 56) | i, low 64 bits the block
// number from 0, each block 4 words used in order. The label is drawn first (Lemire's rejection
// on 64-bit draws: two words each, high word first), then pixel j takes the next word: word
// label_words + j. Class c's pattern value j is word j of stream (kStreamData << 56) | (2^55 + c).
// A token window (runtime/data/synthetic_tokens.cpp, for a model that takes tokens) has no label:
// its token j (0 .. block_size) is word j of the sample's stream.
#pragma once
#include <cstdint>

#include "base/philox.h"
#include "base/rng.h"
#include "kernels/host_device.h"

namespace dp::kernels {

inline constexpr uint64_t kSyntheticPatternId = uint64_t{1} << 55;  // stream ids of the class patterns
inline constexpr float kSyntheticSignal = 0.6f, kSyntheticNoise = 0.4f;

// The counter's high 64 bits of stream `id` (a sample index, or kSyntheticPatternId + class).
DP_HD uint64_t synthetic_stream(uint64_t id) { return (static_cast<uint64_t>(kStreamData) << 56) | id; }

// Word w (0, 1, 2, ...) of stream `stream` under key `seed`: word w % 4 of block w / 4.
DP_HD uint32_t synthetic_word(uint64_t seed, uint64_t stream, uint64_t w) {
  uint32_t block[4];
  Philox::block(seed, w / 4, stream, block);
  return block[w % 4];
}

struct SyntheticLabel {
  int32_t label = 0;
  uint32_t words = 0;  // words the draw used: the first pixel's word
};

// Rng::below(classes) on the sample's stream: 64-bit draws x (high word first) until x >= (2^64 -
// classes) % classes, then x % classes; classes <= 1 draws nothing.
DP_HD SyntheticLabel synthetic_label(uint64_t seed, uint64_t stream, uint64_t classes) {
  SyntheticLabel out;
  if (classes <= 1) return out;
  const uint64_t threshold = (0 - classes) % classes;
  for (uint32_t w = 0;; w += 2) {
    const uint64_t x = (static_cast<uint64_t>(synthetic_word(seed, stream, w)) << 32) | synthetic_word(seed, stream, w + 1);
    if (x >= threshold) {
      out.label = static_cast<int32_t>(x % classes);
      out.words = w + 2;
      return out;
    }
  }
}

// Rng::uniform: the top 24 bits as a float in [0, 1) (exact: an integer below 2^24 times 2^-24).
DP_HD float synthetic_uniform(uint32_t r) { return fp::mul(static_cast<float>(r >> 8), 1.0f / 16777216.0f); }

// One value: kSignal * pattern + kNoise * noise, each product and the sum rounded once.
DP_HD float synthetic_pixel(float pattern, float noise) {
  return fp::add(fp::mul(kSyntheticSignal, pattern), fp::mul(kSyntheticNoise, noise));
}

// A word as a token in [0, vocab), 1 <= vocab <= 2^32: floor(word * vocab / 2^32), Lemire's
// multiply-shift without its rejection step, so that token j is word j (addressable by position on
// the GPU; a rejection loop would shift every later token). Each token is hit by floor or ceil of
// 2^32 / vocab words, so its probability is off 1 / vocab by less than 2^-32: a relative bias below
// vocab / 2^32 (1.2e-5 for GPT-2's 50257 tokens, 6e-8 for bytes).
DP_HD uint32_t synthetic_token_of(uint32_t word, uint64_t vocab) {
  return static_cast<uint32_t>((static_cast<uint64_t>(word) * vocab) >> 32);
}

// Token j of the window of stream `stream` (synthetic_stream(sample index)) under key `seed`.
DP_HD uint32_t synthetic_token(uint64_t seed, uint64_t stream, uint64_t j, uint64_t vocab) {
  return synthetic_token_of(synthetic_word(seed, stream, j), vocab);
}

}  // namespace dp::kernels
