// defines: RingOptions and make_ring_communicator, the project's own collectives backend on host
// buffers (device tensors are staged through pinned host memory: collectives/device_staging.h,
// the contract in collectives/communicator.h): shared memory between the ranks of a node and TCP between nodes (a full mesh built
// through the bootstrap, collectives/ring/mesh.h), the algorithms of collectives/ring/
// algorithms.h, one worker thread that runs the collectives in issue order. The blocking forms
// (allreduce(), ...) run on the calling thread instead when nothing is queued or running: a
// hand-off to the worker and back costs two thread wake-ups, most of a small message's latency
// (62 -> 4 us for 4 bytes on 2 ranks of a loaded 2-core VM, with the yielding spin below).
//
// Tunables (DPTRAIN_*, declared with their ranges in runtime/tunables.cpp, read once from the
// environment and logged when set):
//   DPTRAIN_RING_SMALL_BYTES  allreduce and broadcast messages up to this size use the latency-
//                             optimised algorithm (recursive doubling, binomial tree); larger
//                             ones the ring / pipelined chain. Default 64 KiB, below the alpha-
//                             beta crossover (~200 KB on shared memory, ~500 KB on TCP loopback
//                             here: collectives/ring/README.md) because recursive doubling does
//                             not pipeline.
//   DPTRAIN_RING_PIECE_BYTES  pipelining granularity of the ring and chain (default 256 KiB).
//   DPTRAIN_RING_SOCKET_BUFFER  SO_SNDBUF/SO_RCVBUF of the data sockets (default 4 MiB).
//   DPTRAIN_RING_SHM_BYTES    capacity of each shared-memory FIFO between two ranks of a node
//                             (default 1 MiB; each rank maps (local ranks - 1) of them); 0 keeps
//                             every pair on TCP.
//   DPTRAIN_RING_SPIN_US      how long a rank waiting on shared memory spins before it sleeps
//                             (default 50 us). The spin yields the core (sched_yield) on every
//                             turn: a peer that shares it (other jobs count) runs at once instead
//                             of after a time slice. Without the yield, spinning was slower than
//                             sleeping on a busy machine, and was off with more ranks than cores;
//                             with it, 4 and 8 ranks on 2 cores are 2x faster spinning than not.
//   DPTRAIN_RING_HOST         the address to listen on (default: see ring_listen_host; it
//                             overrides dist.iface).
//   DPTRAIN_RING_HIERARCHICAL 1 (default): all-reduce hierarchically when the job spans several
//                             nodes and some node runs several ranks (a chain reduce within each
//                             node over shared memory, the ring or recursive doubling between one
//                             leader per node, a broadcast within each node); 0: flat always.
//   DPTRAIN_FLIGHT_RECORDS    collectives the flight recorder keeps (default 256).
// Every rank must use the same values; the stream headers catch a rank that does not.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "collectives/bootstrap/bootstrap.h"
#include "collectives/communicator.h"
#include "runtime/tunables.h"

namespace dp {

struct RingOptions {
  double timeout_s = 300;  // no progress for this long in a collective (or its setup) is an error
  size_t small_bytes = 64 << 10;
  size_t piece_bytes = 256 << 10;
  int socket_buffer_bytes = 4 << 20;
  size_t shm_fifo_bytes = 1 << 20;
  double spin_us = 50;
  std::string listen_host;  // empty: ring_listen_host(bootstrap, iface)
  std::string iface;        // dist.iface: listen on this interface's IPv4 address ("" = unset)
  // All-reduce hierarchically when the topology calls for it (several nodes, some with several
  // ranks: collectives/ring/algorithms.h); false: always the flat algorithms.
  bool hierarchical = true;
  size_t flight_records = 256;  // collectives the flight recorder keeps
};

// The DPTRAIN_RING_* tunables of `t` (their defaults are the ones above).
RingOptions ring_options_from_tunables(const Tunables& t, double timeout_s);
// The same with this process's tunables (runtime/tunables.h).
RingOptions ring_options_from_env(double timeout_s);

// Collective over the bootstrap (every rank calls it); throws DpError naming the unreachable rank.
std::unique_ptr<Communicator> make_ring_communicator(Bootstrap& bs, double timeout_s);
std::unique_ptr<Communicator> make_ring_communicator(Bootstrap& bs, const RingOptions& options);

}  // namespace dp
