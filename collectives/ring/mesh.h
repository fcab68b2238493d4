// defines: Mesh (the TCP connections of one ring communicator: per peer, one data socket for the
// algorithms' byte streams and one control socket for liveness, abort notices and status
// queries) and connect_mesh, which builds it through Bootstrap::allgather.
//
// Setup, for ranks r = 0..N-1:
//   1. listen on an ephemeral port of this node's address (ring_listen_host) and allgather
//      "host:port:nonce" through the bootstrap;
//   2. connect twice (data, control) to every lower rank and send a hello
//      {magic, version, kind, rank, size, the listener's nonce, a fresh nonce, HMAC of all that
//      under the job token (Bootstrap::job_token, collectives/bootstrap/job_token.h)};
//   3. accept 2 x (N-1-r) connections from the higher ranks, check each hello (nonce and proof:
//      anything else is dropped, never fatal), answer the ack byte and the listener's own proof.
//      Connections that have not sent a whole hello are read side by side, each for at most
//      DPTRAIN_STORE_HANDSHAKE_S, at most 64 at once: a silent or half-open stranger cannot stall
//      the setup;
//   4. read the acks (and check the proofs) of the connections opened in 2.
// Step 2 never waits on a peer (the listener's backlog completes the TCP handshake), step 3
// waits only on step 2 of higher ranks and step 4 only on step 3 of lower ranks, so the setup
// cannot deadlock. A full mesh costs 2(N-1) sockets per rank: fine up to a few hundred ranks.
//
// Shared memory (shm_fifo_bytes > 0, ranks with the same bootstrap node id): before step 1 each
// rank creates its segment (shm.h) and publishes its name with its address; after step 4 it
// maps the segment of every peer of its node and tells that peer, over their data socket,
// whether it could (one byte each way: both must say yes for the pair to use shared memory,
// else the pair stays on TCP). Then every rank unlinks its own segment's name: all peers that
// will ever map it have done so. The data sockets of shared-memory pairs stay open, unused.
#pragma once
#include <string>
#include <vector>

#include "collectives/bootstrap/bootstrap.h"
#include "collectives/ring/shm.h"
#include "collectives/ring/socket.h"

namespace dp::ring {

// The shared-memory links of one rank: per peer on its node (use[peer]), the inbound FIFO (in
// this rank's segment), the outbound FIFO (in the peer's segment) and the peer's doorbell.
struct ShmLinks {
  ShmSegment own;
  std::vector<ShmSegment> mapped;  // [peer]
  std::vector<bool> use;           // [peer]
  std::vector<ShmFifo> in, out;    // [peer]
  std::vector<Doorbell> bell;      // [peer]
  Doorbell own_bell;
  int local_peers = 0;             // peers linked through shared memory
};

struct Mesh {
  int rank = 0;
  int size = 1;
  std::vector<Socket> data;     // [peer] (none at [rank]): non-blocking, TCP_NODELAY, big buffers
  std::vector<Socket> control;  // [peer] (none at [rank]): non-blocking, TCP_NODELAY
  ShmLinks shm;
};

// The address this rank listens on (collectives/listen_address.h decides): $DPTRAIN_RING_HOST if
// set; the IPv4 address of interface `iface` (dist.iface) if not empty; 127.0.0.1 when every rank
// is on this node (local_size == size); otherwise this host's address (interfaces.h: the host
// name's IPv4 address, or the first interface that is up when the name does not resolve or is
// loopback).
std::string ring_listen_host(const Bootstrap& bs, const std::string& iface = "");

// Collective over the bootstrap; throws DpError naming the peer that could not be reached.
// shm_fifo_bytes: capacity of each shared-memory FIFO; 0 keeps every pair on TCP.
Mesh connect_mesh(Bootstrap& bs, const std::string& listen_host, int socket_buffer_bytes, size_t shm_fifo_bytes,
                  double timeout_s);

}  // namespace dp::ring
