#include "collectives/bootstraps.h"
#include "runtime/error.h"

namespace dp {
std::unique_ptr<Bootstrap> make_pmi2_bootstrap(double) {
  DP_THROW_USER("bootstrap pmi2: not available in this build yet; launch with srun without --mpi=pmi2, or torchrun");
}
}  // namespace dp
