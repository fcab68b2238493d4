// defines: Mesh (the TCP connections of one ring communicator: per peer, one data socket for the
// algorithms' byte streams and one control socket for liveness, abort notices and status
// queries) and connect_mesh, which builds it through Bootstrap::allgather.
//
// Setup, for ranks r = 0..N-1:
//   1. listen on an ephemeral port of this node's address (ring_listen_host) and allgather
//      "host:port:nonce" through the bootstrap;
//   2. connect twice (data, control) to every lower rank and send a hello
//      {magic, version, kind, rank, size, the listener's nonce};
//   3. accept 2 x (N-1-r) connections from the higher ranks, check each hello, answer one ack byte;
//   4. read the acks of the connections opened in 2.
// Step 2 never waits on a peer (the listener's backlog completes the TCP handshake), step 3
// waits only on step 2 of higher ranks and step 4 only on step 3 of lower ranks, so the setup
// cannot deadlock. A full mesh costs 2(N-1) sockets per rank: fine up to a few hundred ranks.
#pragma once
#include <string>
#include <vector>

#include "collectives/bootstrap.h"
#include "collectives/ring/socket.h"

namespace dp::ring {

struct Mesh {
  int rank = 0;
  int size = 1;
  std::vector<Socket> data;     // [peer] (none at [rank]): non-blocking, TCP_NODELAY, big buffers
  std::vector<Socket> control;  // [peer] (none at [rank]): non-blocking, TCP_NODELAY
};

// The address this rank listens on: $DPTRAIN_RING_HOST if set; 127.0.0.1 when every rank is on
// this node (local_size == size); otherwise the first IPv4 address of this host's name.
std::string ring_listen_host(const Bootstrap& bs);

// Collective over the bootstrap; throws DpError naming the peer that could not be reached.
Mesh connect_mesh(Bootstrap& bs, const std::string& listen_host, int socket_buffer_bytes, double timeout_s);

}  // namespace dp::ring
