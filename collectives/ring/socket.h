// defines: Socket (an owned TCP socket, move-only, closed on destruction) and the few blocking-
// with-deadline helpers the connection setup needs (listen, connect, accept, send/recv all).
// The collectives' hot path does its own non-blocking I/O (collectives/ring/transport.h).
#pragma once
#include <chrono>
#include <cstddef>
#include <string>
#include <utility>

namespace dp::ring {

using Clock = std::chrono::steady_clock;

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void close();
  // Both directions: the peer sees EOF and our own blocked poll wakes up. Never throws.
  void shutdown() const;

  void set_nonblocking() const;
  void set_nodelay() const;
  // SO_SNDBUF and SO_RCVBUF (the kernel caps them at net.core.{w,r}mem_max).
  void set_buffer_sizes(int bytes) const;

 private:
  int fd_ = -1;
};

enum class IoStatus { Ok, Closed, Timeout, Error };

// A listening socket on host (numeric IPv4 or a name) and an ephemeral port, written to *port.
Socket listen_tcp(const std::string& host, int backlog, int* port);
// Connects to host:port, retrying refused attempts until the deadline; throws DpError naming
// `peer_what` ("rank 3 at 10.0.0.2:41234") when it cannot.
Socket connect_tcp(const std::string& host, int port, Clock::time_point deadline, const std::string& peer_what);
// One accepted connection, or an invalid Socket at the deadline.
Socket accept_tcp(const Socket& listener, Clock::time_point deadline);
// All of [buf, buf+n) through a (blocking or non-blocking) socket before the deadline.
// *err receives errno for IoStatus::Error.
IoStatus send_all(const Socket& s, const void* buf, size_t n, Clock::time_point deadline, int* err);
IoStatus recv_all(const Socket& s, void* buf, size_t n, Clock::time_point deadline, int* err);

// Milliseconds until the deadline for poll(2): 0 when past, capped to fit an int.
int poll_ms_until(Clock::time_point deadline);

}  // namespace dp::ring
