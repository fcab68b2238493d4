// defines: Rng, a counter-based generator over Philox4x32-10 (base/philox.h), and RngStream, the
// well-known streams. Counter-based so that a (seed, stream, offset) triple names a value: the
// same numbers on any thread count, and resumable from a saved offset.
#pragma once
#include <cmath>
#include <cstdint>

#include "base/philox.h"

namespace dp {

class Rng {
 public:
  // `stream` separates independent uses of one seed (init, dropout, shuffling, augmentation).
  explicit Rng(uint64_t seed = 0, uint64_t stream = 0) : seed_(seed), stream_(stream) {}

  uint32_t next_u32() {
    if (have_ == 0) {
      Philox::block(seed_, counter_++, stream_, buf_);
      have_ = 4;
    }
    return buf_[4 - have_--];
  }
  uint64_t next_u64() { return (static_cast<uint64_t>(next_u32()) << 32) | next_u32(); }
  // Uniform in [0, 1) with 24 random bits.
  float uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) {
    double u = static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
  }
  // Standard normal (Box-Muller on two uniforms in (0, 1]).
  double normal() {
    double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Uniform integer in [0, n) without modulo bias (Lemire's method with rejection).
  uint64_t below(uint64_t n) {
    if (n <= 1) return 0;
    uint64_t threshold = (0 - n) % n;
    for (;;) {
      uint64_t x = next_u64();
      if (x >= threshold) return x % n;
    }
  }

  // Position, for checkpoints: (counter, unread values in the current block).
  uint64_t counter() const { return counter_; }
  int buffered() const { return have_; }
  void restore(uint64_t counter, int buffered) {
    counter_ = counter;
    have_ = 0;
    if (buffered > 0) {
      Philox::block(seed_, counter_ - 1, stream_, buf_);
      have_ = buffered;
    }
  }
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

 private:
  uint64_t seed_, stream_;
  uint64_t counter_ = 0;
  uint32_t buf_[4] = {0, 0, 0, 0};
  int have_ = 0;
};

// Well-known streams, so that e.g. changing the data order never changes the initial weights.
enum RngStream : uint64_t { kStreamInit = 1, kStreamDropout = 2, kStreamShuffle = 3, kStreamAugment = 4, kStreamData = 5,
                          kStreamCrop = 6 };  // kStreamCrop: random resized crops

}  // namespace dp
