#include "collectives/bootstraps.h"
#include "runtime/error.h"

namespace dp {
std::unique_ptr<Bootstrap> make_pmix_bootstrap(double) {
  DP_THROW_USER("bootstrap pmix: not available in this build yet; launch with srun without --mpi=pmix, or torchrun");
}
}  // namespace dp
