// defines: TcpStoreServer and TcpStoreClient, the small key-value store that rank 0 serves for
// the env and Slurm bootstraps (torch's TCPStore, cut down to what a bootstrap needs), and
// StoreLimits, the bounds that keep a stranger from hurting the job through it.
//
// One request kind does the work: a transaction "delete these keys, set these, then wait until
// these keys exist" answered by the server when they all exist or at the request's deadline.
// Setting and waiting in one request matters: when the last rank's key arrives, every waiter is
// answered in the same server iteration, so rank 0 may leave right after its own answer without
// stranding a peer that had set its key but not yet asked for the others (its stop flushes every
// queued answer).
//
// The server is one thread around poll(2) with non-blocking sockets and per-connection buffers,
// so a slow, stalled or dead client never blocks the others. On accept the server greets with a
// challenge (a fresh nonce, the job's public id, who serves it); the client answers with its
// rank, world size and, when the job has a token (collectives/bootstrap/job_token.h), an HMAC
// over both nonces; the server answers with its own proof, so each side knows the other is of
// this job and the token never crosses the wire. A client that cannot prove the token is refused
// before it can read or change a key, and is never counted as a rank. Among proved members, a
// world-size disagreement or two processes claiming one rank while the job starts poison the
// store (every rank gets the same clear error); once every rank has joined, a second claim to a
// connected rank is refused alone. A member whose connection drops without a goodbye is "lost":
// waits that can no longer complete fail at once instead of at the timeout.
//
// Bounds (StoreLimits): connections that have not proved the token are at most max_pending (the
// oldest is closed for a new one), each has handshake_s to do it and may send one small frame;
// a member's frame is at most max_frame bytes, and a member may not send more than one frame
// ahead. So the server's memory is at most world_size x max_frame + max_pending x 65 KiB of
// buffers, its descriptors world_size + max_pending + 3, and it never spins: when accept fails
// (no descriptor left) it stops listening for 100 ms. Members' sockets use TCP keepalive, so a
// host that vanished is noticed (as lost) even while no request is outstanding.
//
// Wire format: collectives/bootstrap/tcp_store_wire.h.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dp {

// Owns a file descriptor (socket, pipe): closed on destruction; move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct StoreLimits {
  size_t max_frame = 4u << 20;  // bytes of one member's request
  int max_pending = 64;         // connections not yet proved
  double handshake_s = 5;       // to prove the token
  static StoreLimits from_tunables();  // DPTRAIN_STORE_MAX_FRAME_BYTES, _MAX_PENDING, _HANDSHAKE_S
};

class TcpStoreServer {
 public:
  // Listens on host:port (host: an address or a name of this host, never the wildcard unless
  // asked for with "0.0.0.0"; SO_REUSEADDR; port 0 picks a free one, see port()) and starts the
  // server thread. `who` prefixes error messages ("bootstrap env"); `token` is the job's secret
  // ("": none, anyone who reaches the port may use the store). Throws DpError when the address
  // cannot be bound, naming it and the usual cause (when the port is another dptrain job's
  // store: that job).
  TcpStoreServer(const std::string& who, const std::string& host, int port, int world_size,
                 const std::string& token = "", const StoreLimits& limits = StoreLimits::from_tunables());
  // Stops the thread. After a failure the store knows of (a lost rank, a timeout, a poisoned
  // store) it first keeps serving for up to 2 s while clients that have not said goodbye remain,
  // so they hear the cause rather than "connection lost". Then it answers every waiter with
  // CLOSING, sends every queued answer (at most 10 s) and closes.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

class TcpStoreClient {
 public:
  // Connects to host:port, retrying with exponential backoff (10 ms .. 1 s) until timeout_s has
  // passed (rank 0 may start later than the others; an info line every report_s seconds says it
  // waits; a connection closed during the greeting, as when the store sheds connections under a
  // flood, is retried too), then proves the job token and introduces itself. Throws DpError
  // naming the address and the last error when it cannot connect, and the store's message when
  // it refuses this rank (world-size mismatch, duplicate rank), and at once when the store
  // belongs to another job or the tokens disagree.
  TcpStoreClient(const std::string& who, const std::string& host, int port, int rank, int world_size,
                 double timeout_s, const std::string& token = "", double report_s = 5);
  ~TcpStoreClient();  // says goodbye (so the server does not count this rank as lost)
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  struct Result {
    enum Status { Ok, Timeout, Lost, Closing } status = Ok;
    std::vector<std::string> values;  // Ok: one per waited key, in order
    std::vector<bool> present;        // Timeout/Lost/Closing: which waited keys existed
    std::vector<int> lost_ranks;      // Lost: ranks whose connection dropped without a goodbye
  };
  // Deletes `del`, sets `set`, then waits up to timeout_s for every key of `wait`. Throws DpError
  // when the store is unreachable, says the job is poisoned (the message of the cause), or does
  // not answer within timeout_s plus a margin. report_only: a Timeout is a progress report (the
  // caller asks again), which the store does not count as a failure.
  Result transact(const std::vector<std::string>& del, const std::vector<std::pair<std::string, std::string>>& set,
                  const std::vector<std::string>& wait, double timeout_s, bool report_only = false);

 private:
  void send_frame(const std::string& body, double timeout_s);
  std::string recv_frame(double timeout_s);
  bool connect_once(const std::string& host, int port, std::chrono::steady_clock::time_point deadline,
                    std::string& last_err);
  // The greeting and the hello on a fresh connection; false when the store closed it first.
  bool introduce(int rank, int world_size, const std::string& token, double timeout_s, std::string& last_err);
  std::string who_, endpoint_;
  UniqueFd fd_;
};

}  // namespace dp
