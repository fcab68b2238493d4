// Barrier: dissemination (Hensgen, Finkel and Manber 1988), header-only messages.
#include "collectives/ring/algorithms.h"

namespace dp::ring {

void dissemination_barrier(Transport& tx) {
  const int n = tx.size(), r = tx.rank();
  for (uint32_t k = 0, dist = 1; static_cast<int>(dist) < n; ++k, dist *= 2)
    tx.sendrecv(mod(r + static_cast<int>(dist), n), nullptr, 0, mod(r - static_cast<int>(dist), n), nullptr, 0, k);
}

}  // namespace dp::ring
