// defines: keyed_rng, the one way the data layer derives a random stream from a name.
//
// Philox is a keyed bijection of a 128-bit counter (base/rng.h), so distinct counters give
// independent blocks. The data layer names a stream by (seed, tag, id, epoch) and maps it onto
// Philox's inputs without hashing, hence without collisions:
//   key             = seed
//   counter high 64 = tag << 56 | id          (id < 2^56: a sample index or an epoch)
//   counter low 64  = epoch << 32, then +1 per block drawn (each stream draws < 2^32 blocks)
// So the numbers for a sample depend on nothing but (seed, tag, id, epoch): not on threads,
// batch size, or the order in which samples are visited.
#pragma once
#include <cstdint>

#include "base/error.h"
#include "base/rng.h"

namespace dp::data {

inline Rng keyed_rng(uint64_t seed, RngStream tag, uint64_t id, uint64_t epoch = 0) {
  DP_CHECK(id < (uint64_t{1} << 56), "random stream id {} does not fit in 56 bits", id);
  DP_CHECK(epoch < (uint64_t{1} << 32), "epoch {} does not fit in 32 bits", epoch);
  Rng rng(seed, (static_cast<uint64_t>(tag) << 56) | id);
  rng.restore(epoch << 32, 0);
  return rng;
}

}  // namespace dp::data
