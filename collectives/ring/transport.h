// defines: Transport, the byte-stream engine under the ring algorithms: it moves any number of
// concurrent send and receive streams over the data sockets of a Mesh with non-blocking I/O and
// one poll(2) loop, and turns every way that can fail into a DpError naming the rank to blame.
//
// A stream is a list of regions (pointer, length) preceded on the wire by a 40-byte header
// saying which collective it belongs to (sequence number, kind, dtype, op, algorithm, count,
// root, step, and the desync hash: a running hash of every collective's (op, dtype, count,
// gradient bucket) up to this one); the receiver checks it, so ranks that issued different
// collectives fail with a clear message instead of misreading bytes, and ranks that reduce
// different buckets of the same size, or whose histories parted earlier, fail as well. Pipelining: a send stream may only send its first
// `ready` regions; a receive stream calls on_region(i) as region i completes (reduce a piece,
// then make the forwarding send stream's next region ready). Regions are received one at a
// time, so many receive regions may share one scratch piece.
//
// Links: a peer is reached through its TCP data socket, or through a pair of shared-memory FIFOs
// when it runs on this node (mesh.h). While nothing moves, the wait is poll(2) on the sockets
// (and the control plane's eventfd); when every pending stream is on shared memory it is a
// short spin (only when this node has a core per rank) then a futex sleep on this rank's
// doorbell, which peers ring when they write to or read from its FIFOs and the control plane
// rings on every event. A wait on both sleeps in poll(2), and the doorbell's ringers then also
// send a one-byte kick over the pair's (otherwise idle) TCP socket (shm.h).
//
// Deadlines: a collective fails when none of its streams has moved a byte for timeout_s. The
// rank blamed is, in order: a peer whose control connection closed, a peer that has not entered
// this collective (asked through the control plane), a peer that does not answer, and only then
// the peer whose bytes are missing. Failures are sent to every peer before throwing.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/ring/control.h"
#include "collectives/ring/mesh.h"
#include "collectives/ring/topology.h"
#include "collectives/ring/socket.h"
#include "base/dtype.h"

namespace dp::ring {

enum class Kind : uint8_t { Allreduce = 1, Broadcast = 2, Allgather = 3, ReduceScatter = 4, Barrier = 5 };
enum class Algo : uint8_t { Local = 0, Ring = 1, RecursiveDoubling = 2, BinomialTree = 3, Chain = 4,
                            Dissemination = 5, Hierarchical = 6 };
const char* kind_name(Kind k);
const char* algo_name(Algo a);

// What the streams of one collective carry in their headers, and its description for errors.
struct CollectiveInfo {
  uint64_t seq = 0;
  Kind kind = Kind::Barrier;
  DType dtype = DType::F32;
  uint8_t op = 0;  // ReduceOp as an integer (0 when none)
  Algo algo = Algo::Local;
  int64_t count = 0;
  int32_t root = -1;
  int32_t bucket = -1;   // the gradient bucket (collective_tag.h), -1 for none
  uint64_t history = 0;  // desync_hash of this collective and every earlier one
  // "ring allreduce #12 (f32, 1048576 elements, sum)", "ring barrier #3"
  std::string description() const;
};

// The desync check's running hash: `previous` (0 before the first collective) combined with
// this collective's op (kind and reduction), dtype, count and bucket. Pure, cheap (a few
// multiply-xors per collective), so it stays on.
uint64_t desync_hash(uint64_t previous, const CollectiveInfo& info);

// What every rank must agree on, for the control plane's mismatch check.
Signature signature_of(const CollectiveInfo& info);
// "broadcast (f32, 10 elements, root 1)"; with the algorithm when with_algo.
std::string describe_signature(const Signature& sig, bool with_algo = false);
// The error when ranks issued different collectives as #seq: `issued` holds (rank, signature)
// for every rank whose answer is known (this one included), in any order. Pure; worded the same
// whichever rank detects it:
//   "ranks 0, 2 issued broadcast (f32, 10 elements, root 0) as #3 while rank 1 issued broadcast
//    (f32, 10 elements, root 1): the root differs; collectives must be issued ..."
std::string mismatch_reason(uint64_t seq, std::vector<std::pair<int, Signature>> issued);

struct Region {
  char* ptr;
  size_t len;
};

struct SendStream {
  int peer = -1;
  std::vector<Region> regions;
  size_t ready = 0;  // regions [0, ready) may be sent
  // progress (the transport's)
  size_t header_done = 0, cur = 0, off = 0;
  bool complete() const;
};

struct RecvStream {
  int peer = -1;
  std::vector<Region> regions;
  std::function<void(size_t)> on_region;  // called as region i completes, in order; may be empty
  // Optional; used on shared-memory links only: region i's bytes [offset, offset + n) are handed
  // over where they lie in the FIFO (no copy into the region's pointer, which is not written),
  // always in whole units of `unit` bytes (an element split by the FIFO's wrap is put together
  // first). How the ring reduces straight out of a peer's FIFO.
  std::function<void(size_t i, size_t offset, const char* data, size_t n)> consume;
  size_t unit = 1;
  // progress (the transport's)
  size_t header_done = 0, cur = 0, off = 0;
  size_t carry_len = 0;
  alignas(8) char carry[8] = {};
  alignas(8) char header[40] = {};
  bool complete() const;
};

class Transport {
 public:
  // The mesh's data sockets (none at [rank], non-blocking) and shared-memory links. spin_us:
  // how long to spin before sleeping on the doorbell; pause_before_yield: the spin's first
  // microseconds only pause (right when every local rank has a core of its own; with two on a
  // core, pausing only delays the one that would answer).
  Transport(int rank, int size, std::vector<Socket> data, ShmLinks shm, ControlPlane& control, double timeout_s,
            double spin_us, bool pause_before_yield = true);
  ~Transport();
  // Peers reached through shared memory.
  int shm_peers() const { return shm_.local_peers; }
  bool shm_link(int peer) const { return shm_.use[peer]; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_s() const { return timeout_s_; }
  // Errors name ranks through it ("ranks 4-5 on host h3"); not owned. Unset: "ranks 4, 5".
  void set_topology(const RingTopology* topo) { topo_ = topo; }
  std::string name_ranks(const std::vector<int>& ranks) const;

  // For the flight recorder, from any thread: in the collective running now, the peers whose
  // stream has arrived (heard) and those whose data it is still waiting for (awaited).
  bool heard_from(int peer) const { return heard_[peer].load(std::memory_order_relaxed) != 0; }
  bool awaiting(int peer) const { return awaited_[peer].load(std::memory_order_relaxed) != 0; }

  // Starts a collective: fails at once (throws) when the communicator is already broken.
  void begin(CollectiveInfo info);
  const CollectiveInfo& info() const { return info_; }

  // Moves every stream to completion, or throws. `step` goes into the headers (the algorithms
  // number their rounds) and is checked on the receiving side.
  void run(std::vector<SendStream>& sends, std::vector<RecvStream>& recvs, uint32_t step);
  // One buffer each way, concurrently (either side may be absent: peer < 0).
  void sendrecv(int to, const void* send_buf, size_t send_bytes, int from, void* recv_buf, size_t recv_bytes,
                uint32_t step);

  // Reusable scratch memory (two independent slots), at least `bytes` long.
  char* scratch(int slot, size_t bytes);

  // Records the failure (telling every peer), then throws it as this collective's DpError.
  [[noreturn]] void fail(int culprit, const std::string& reason);
  // Formats a failure (recorded here or by a peer) as this collective's DpError and throws it.
  [[noreturn]] void raise(const Failure& f) const;

 private:
  bool try_send(SendStream& s, uint32_t step);
  bool try_recv(RecvStream& r, uint32_t step);
  bool try_send_shm(SendStream& s, uint32_t step);
  bool try_recv_shm(RecvStream& r, uint32_t step);
  void advance_send(SendStream& s, size_t bytes);
  // Nothing moved: wait for something to (or for the deadline).
  void wait(const std::vector<SendStream>& sends, const std::vector<RecvStream>& recvs, Clock::time_point deadline,
            uint32_t bell_seen);
  // A shared-memory peer whose process died cannot close a FIFO: when the control plane says it
  // is gone and its FIFO can no longer move our stream, that is its EOF.
  void check_lost_shm_peers(const std::vector<SendStream>& sends, const std::vector<RecvStream>& recvs);
  void check_header(const RecvStream& r, uint32_t step);
  // The headers differ only in the desync hash: find the collective where the histories part.
  [[noreturn]] void history_differs(int peer);
  void check_control();
  [[noreturn]] void peer_lost(int peer, int err);
  [[noreturn]] void timed_out(const std::vector<SendStream>& sends, const std::vector<RecvStream>& recvs);
  // Stalled for a moment: asks the peers what they issued as this collective and fails at once
  // when a rank issued something else (a mismatch that no stream header shows).
  void probe_mismatch();
  void check_signatures(const std::vector<PeerStatus>& st);
  void make_header(uint32_t step, char out[40]) const;

  const int rank_;
  const int size_;
  std::vector<Socket> data_;
  ShmLinks shm_;
  ControlPlane& control_;
  const RingTopology* topo_ = nullptr;
  std::unique_ptr<std::atomic<uint8_t>[]> heard_, awaited_;  // [peer]
  const double timeout_s_;
  const double spin_us_;
  const bool pause_before_yield_;  // false when ranks of this node share cores: yield at once
  uint64_t control_events_seen_ = 0;
  bool bye_seen_ = false;  // a peer has left (said BYE): check_control at every begin()
  std::vector<SendStream> sr_sends_;  // sendrecv's streams, reused
  std::vector<RecvStream> sr_recvs_;
  std::vector<bool> kick_closed_;  // [peer]: its kick socket reached EOF
  CollectiveInfo info_;
  Clock::time_point next_probe_;  // no mismatch probe before this
  double probe_interval_s_ = 0;   // stall before the next probe; doubles up to kMaxProbeIntervalS
  struct Scratch {
    std::unique_ptr<char[]> mem;
    size_t bytes = 0;
  } scratch_[2];
};

}  // namespace dp::ring
