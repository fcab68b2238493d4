// defines: make_communicator, the one place that turns a backend name (dist.backend, collbench
// --backend) into a Communicator.
#pragma once
#include <memory>
#include <string>

#include "collectives/bootstrap/bootstrap.h"
#include "collectives/communicator.h"

namespace dp {

// Collective over the bootstrap (every rank calls it with the same arguments):
//  - "ring": our own collectives on host tensors (make_ring_communicator);
//  - "nccl": NCCL on device tensors, one GPU per rank (collectives/nccl/nccl_communicator.h);
//    UserError when this build has no CUDA or this process sees no GPU;
//  - a world of one: SingleProcessCommunicator whatever the backend (after the checks above).
// timeout_s bounds every collective (no progress for that long is an error on every rank).
// UserError naming the known backends for any other name.
std::unique_ptr<Communicator> make_communicator(const std::string& backend, Bootstrap& boot, double timeout_s);

// The names make_communicator knows, for help texts: "ring, nccl".
const char* communicator_backends();

}  // namespace dp
