#include "collectives/ring/algorithms.h"

#include <algorithm>

namespace dp::ring {

Block ring_block(int64_t count, int n, int i) {
  const int64_t base = count / n, extra = count % n;
  return {i * base + std::min<int64_t>(i, extra), base + (i < extra ? 1 : 0)};
}

int lower_power_of_two(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace dp::ring
