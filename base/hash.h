// defines: splitmix64 (the finaliser of Steele, Lea and Flood's SplitMix64, "Fast splittable
// pseudorandom number generators", OOPSLA'14: a cheap bijective mix of 64 bits) and
// hash_combine (a value folded into a running hash through it), the one copy every hash of the
// project uses: cache keys (convolution algorithms, cuDNN graph plans), dropout streams, the
// ring's desync signature.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dp {

constexpr uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// h = splitmix64(h + golden ratio + v): any single difference in the values changes every later h.
constexpr void hash_combine(size_t& h, uint64_t v) { h = static_cast<size_t>(splitmix64(h + 0x9E3779B97F4A7C15ull + v)); }

}  // namespace dp
