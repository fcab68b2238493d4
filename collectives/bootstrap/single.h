// defines: make_single_bootstrap, the bootstrap of a process alone (rank 0 of 1).
#pragma once
#include <memory>

#include "collectives/bootstrap/bootstrap.h"

namespace dp {

// rank 0 of 1; allgather returns {mine}.
std::unique_ptr<Bootstrap> make_single_bootstrap();

}  // namespace dp
