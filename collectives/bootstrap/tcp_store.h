// defines: TcpStoreServer and TcpStoreClient, the small key-value store that rank 0 serves for
// the env and Slurm bootstraps (torch's TCPStore, cut down to what a bootstrap needs).
//
// One request kind does the work: a transaction "delete these keys, set these, then wait until
// these keys exist" answered by the server when they all exist or at the request's deadline.
// Setting and waiting in one request matters: when the last rank's key arrives, every waiter is
// answered in the same server iteration, so rank 0 may leave right after its own answer without
// stranding a peer that had set its key but not yet asked for the others (its stop flushes every
// queued answer).
//
// The server is one thread around poll(2) with non-blocking sockets and per-connection buffers,
// so a slow, stalled or dead client never blocks the others. Clients say who they are (rank,
// world size) first: a world-size disagreement or two processes claiming one rank poison the
// store, and every rank gets the same clear error. A client whose connection drops without a
// goodbye is "lost": waits that can no longer complete fail at once instead of at the timeout.
//
// Wire format (little-endian; every frame is u32 body length + body):
//   request  HELLO  u8 1, i32 rank, i32 world_size
//            TXN    u8 2, u32 timeout_ms, u32 ndel, ndel x str, u32 nset, nset x (str key, bytes
//                   value), u32 nwait, nwait x str
//            BYE    u8 3
//            TXN_REPORT  as TXN, u8 4: the same transaction, but its deadline passing only answers
//                   TIMEOUT (the rank reports who is missing and asks again), not a failure
//   reply    OK      u8 0 [TXN: nwait x bytes, the values in request order]
//            TIMEOUT u8 1, nwait x u8 present
//            LOST    u8 2, nwait x u8 present, u32 n, n x i32 lost rank
//            ERROR   u8 3, str message
//            CLOSING u8 4, nwait x u8 present (the server stops: rank 0 left or failed)
//   str = u32 length + bytes; bytes = u64 length + bytes.
#pragma once
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

class TcpStoreServer {
 public:
  // Listens on host:port (SO_REUSEADDR; port 0 picks a free one, see port()) and starts the
  // server thread. `who` prefixes error messages ("bootstrap env"). Throws DpError when the
  // address cannot be bound (naming it and the usual cause).
  TcpStoreServer(const std::string& who, const std::string& host, int port, int world_size);
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
  // waits), then introduces itself. Throws DpError naming the address and the last error when it
  // cannot connect, and the store's message when it refuses this rank (world-size mismatch,
  // duplicate rank).
  TcpStoreClient(const std::string& who, const std::string& host, int port, int rank, int world_size,
                 double timeout_s, double report_s = 5);
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
  std::string who_, endpoint_;
  UniqueFd fd_;
};

}  // namespace dp
