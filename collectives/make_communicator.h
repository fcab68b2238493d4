// defines: make_communicator, the one place that turns a backend (dist.backend, collbench
// --backend; the names: runtime/collective_backend.h) into a Communicator.
#pragma once
#include <memory>
#include <string>

#include "collectives/bootstrap/bootstrap.h"
#include "collectives/communicator.h"
#include "runtime/collective_backend.h"

namespace dp {

// Collective over the bootstrap (every rank calls it with the same arguments):
//  - Ring: our own collectives on host tensors (make_ring_communicator);
//  - Nccl: NCCL on device tensors, one GPU per rank (collectives/nccl/nccl_communicator.h);
//    UserError when this build has no CUDA or this process sees no GPU;
//  - a world of one: SingleProcessCommunicator whatever the backend (after the checks above).
// timeout_s bounds every collective (no progress for that long is an error on every rank).
// iface: dist.iface ("" = unset), the network interface the ring's listeners bind
// (collectives/listen_address.h); NCCL reads NCCL_SOCKET_IFNAME instead.
std::unique_ptr<Communicator> make_communicator(CollectiveBackend backend, Bootstrap& boot, double timeout_s,
                                                const std::string& iface = "");

// A backend named outside the config (collbench --backend): UserError naming the known backends
// for any other name. The config schema parses dist.backend itself.
CollectiveBackend parse_collective_backend(const std::string& name);

}  // namespace dp
