// defines: Failure (who is to blame for a broken collective, and why) and ControlPlane, the
// thread that owns the control sockets of a ring communicator.
//
// The control plane is how every surviving rank learns, quickly and with the right name, that
// a peer is gone or stuck, whatever the data sockets of the collective in flight happen to be:
//  - a peer's process dies: the kernel closes its control sockets; every rank sees EOF at once.
//  - a rank detects a failure (EOF, reset, timeout): it sends ABORT {culprit, reason} to every
//    peer before it throws, so ranks that wait on someone else fail now, naming the culprit.
//  - a data wait times out: the waiter asks every peer which collective it is in (QUERY ->
//    STATUS {entered, completed}); this thread answers for its own rank even while the
//    application is busy elsewhere, so the rank that stopped calling collectives is the one
//    named, not the neighbour that is stuck waiting on it.
//  - a communicator is destroyed: BYE {completed} says it left cleanly after collective #c.
//  - collectives issued differently (another op, dtype, count, reduction or root at the same
//    sequence number) that the stream headers cannot catch, because nobody receives the odd
//    stream (a broadcast whose ranks disagree on the root): a rank whose collective has not
//    moved for a moment asks its peers what they issued as that collective (QUERY with the
//    sequence number; STATUS carries the signature, kept for the last kSignatureHistory).
//
// Wire format (host byte order, like the data streams: one machine architecture per job): a
// 48-byte header {u32 magic "DPCT", u8 type, u8[3], i32 culprit, i32 reporter, u32 text length,
// u32 pad, u64 a, u64 b, u64 c} then the text:
//   QUERY  a = query id, b = seq     STATUS a = query id, b = entered, c = completed,
//                                           text = {u64 seq, Signature} when seq is remembered
//   ABORT  a = seq, culprit, reporter, text = reason              BYE a = completed
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/ring/socket.h"

namespace dp::ring {

struct Failure {
  int culprit = -1;   // the rank to blame; -1 when none is (an explicit abort)
  int reporter = -1;  // the rank that detected it (this one, or the peer that sent the notice)
  uint64_t seq = 0;   // the collective it was detected in (0: between collectives)
  std::string reason; // "rank 2 closed the connection (its process died or exited)"
};

// What a collective was issued as: everything every rank must agree on.
struct Signature {
  uint8_t kind = 0, dtype = 0, op = 0, algo = 0;  // ring::Kind, DType, ReduceOp + 1 (0: none), ring::Algo
  int32_t root = -1;
  int64_t count = 0;
  int32_t bucket = -1;  // the gradient bucket (collectives/collective_tag.h), -1 for none
  uint32_t pad = 0;
  bool operator==(const Signature&) const = default;
};
static_assert(sizeof(Signature) == 24);

struct PeerStatus {
  bool answered = false;  // replied to the query in time
  bool closed = false;    // its control connection is gone
  bool said_bye = false;  // ... after a clean BYE
  uint64_t entered = 0;   // the last collective it started
  uint64_t completed = 0; // the last collective it finished
  bool has_signature = false;  // it told what it issued as the collective asked about
  Signature signature;
};

class ControlPlane {
 public:
  // control[p]: the control socket to peer p (none at [rank]), already non-blocking. waker (may
  // be empty) is called on every event, from any thread: how a waiter that sleeps on something
  // other than wake_fd (a shared-memory doorbell) gets woken.
  ControlPlane(int rank, int size, std::vector<Socket> control, std::function<void()> waker = {});
  // Sends BYE to every peer, stops the thread, closes the sockets.
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // The worker's progress, reported to peers that ask.
  void entered(uint64_t seq, const Signature& sig);
  // What this rank issued as collective #seq, if it is among the last kSignatureHistory.
  std::optional<Signature> issued(uint64_t seq);
  void completed(uint64_t seq) { completed_.store(seq); }

  // Readable (an eventfd) whenever something happened that a waiting collective must look at:
  // a failure was recorded, or a peer's control connection closed. The reader drains it.
  int wake_fd() const { return wake_fd_; }
  void drain_wake() const;
  // Bumped on every such event: a cheap "did anything happen since I last looked".
  uint64_t events() const { return events_.load(std::memory_order_acquire); }
  // The peer's control connection closed without a BYE (its process died, most likely).
  bool lost(int peer) const { return lost_[peer].load(std::memory_order_acquire); }

  // The first failure recorded, locally or by a peer's notice.
  std::optional<Failure> failure() const;
  // Records `f` unless a failure is already recorded, then sends ABORT notices to every peer
  // (once). Returns the failure that won. Never throws.
  Failure fail(const Failure& f);

  // Asks every peer which collective it is in (and, when about_seq > 0, what it issued as
  // collective #about_seq, if it still remembers); waits up to wait_s for the answers.
  std::vector<PeerStatus> query_status(double wait_s, uint64_t about_seq = 0);
  // Peers whose control connection closed, and whether after a BYE (with its completed seq).
  PeerStatus peer_state(int peer) const;
  // The answers to the last query_status (empty before the first) and the collective it asked
  // about (its about_seq), for the flight recorder.
  std::vector<PeerStatus> last_status(uint64_t* about_seq) const;
  // After a data connection to `peer` broke: waits up to wait_s until the control connection to
  // it closes too or any failure notice arrives, so that the error names the right rank.
  void await_peer_verdict(int peer, double wait_s);

 private:
  struct Peer {
    Socket sock;
    std::mutex send_mu;          // writers: worker, user thread (abort), control thread (STATUS)
    std::string inbox;           // bytes of a partial message
    PeerStatus state;            // guarded by mu_
    uint64_t answered_query = 0; // guarded by mu_
  };
  void loop();
  void handle(int peer, uint8_t type, int32_t culprit, int32_t reporter, uint64_t a, uint64_t b, uint64_t c,
              std::string text);
  bool send(int peer, uint8_t type, int32_t culprit, int32_t reporter, uint64_t a, uint64_t b, uint64_t c,
            const std::string& text);
  void on_closed(int peer);
  void wake() const;

  const int rank_;
  const int size_;
  std::vector<Peer> peers_;
  int wake_fd_ = -1;  // eventfd: tells waiting collectives to look
  int stop_fd_ = -1;  // eventfd: stops the thread
  const std::function<void()> waker_;
  mutable std::atomic<uint64_t> events_{0};
  std::unique_ptr<std::atomic<bool>[]> lost_;
  std::atomic<uint64_t> entered_{0};
  // The signatures of the last kSignatureHistory collectives entered, by seq % kSignatureHistory.
  static constexpr size_t kSignatureHistory = 16;
  std::mutex history_mu_;
  std::pair<uint64_t, Signature> history_[kSignatureHistory] = {};
  std::atomic<uint64_t> completed_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Failure> failure_;
  bool notices_sent_ = false;
  uint64_t query_id_ = 0;
  std::vector<PeerStatus> last_status_;
  uint64_t last_status_seq_ = 0;
  std::thread thread_;
};

}  // namespace dp::ring
