#include "collectives/ring/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/error.h"

namespace dp::ring {

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown() const {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::set_nonblocking() const {
  int flags = fcntl(fd_, F_GETFL, 0);
  CHECK_SYS(flags);
  CHECK_SYS(fcntl(fd_, F_SETFL, flags | O_NONBLOCK));
}

void Socket::set_nodelay() const {
  int one = 1;
  CHECK_SYS(setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));
}

void Socket::set_buffer_sizes(int bytes) const {
  CHECK_SYS(setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes));
  CHECK_SYS(setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes));
}

int poll_ms_until(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left);
}

namespace {

sockaddr_in resolve_ipv4(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  DP_CHECK(rc == 0 && res, "cannot resolve host '{}': {}", host, gai_strerror(rc));
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return addr;
}

// Waits for `events` on fd until the deadline; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, poll_ms_until(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) CHECK_SYS(rc);
  }
}

}  // namespace

Socket listen_tcp(const std::string& host, int backlog, int* port) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  CHECK_SYS(s.fd());
  int one = 1;
  CHECK_SYS(setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
  sockaddr_in addr = resolve_ipv4(host, 0);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw DpError(fmt::format("ring: cannot listen on {} [{}]: {} (set DPTRAIN_RING_HOST to an address of this "
                              "machine)",
                              host, identity_string(), std::strerror(errno)));
  CHECK_SYS(::listen(s.fd(), backlog));
  socklen_t len = sizeof addr;
  CHECK_SYS(getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len));
  *port = ntohs(addr.sin_port);
  return s;
}

Socket connect_tcp(const std::string& host, int port, Clock::time_point deadline, const std::string& peer_what) {
  const sockaddr_in addr = resolve_ipv4(host, port);
  int last_err = 0;
  auto backoff = std::chrono::milliseconds(1);
  while (true) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    CHECK_SYS(s.fd());
    s.set_nonblocking();
    int rc = ::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    if (rc == 0) return s;
    last_err = errno;
    if (last_err == EINPROGRESS) {
      if (!wait_fd(s.fd(), POLLOUT, deadline)) break;
      int so_err = 0;
      socklen_t len = sizeof so_err;
      CHECK_SYS(getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &so_err, &len));
      if (so_err == 0) return s;
      last_err = so_err;
    }
    if (last_err != ECONNREFUSED && last_err != ETIMEDOUT && last_err != ECONNRESET && last_err != EAGAIN) break;
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  throw DpError(fmt::format("ring: cannot connect to {} [{}]: {}", peer_what, identity_string(),
                            last_err ? std::strerror(last_err) : "timed out"));
}

Socket accept_tcp(const Socket& listener, Clock::time_point deadline) {
  while (wait_fd(listener.fd(), POLLIN, deadline)) {
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return Socket(fd);
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) CHECK_SYS(fd);
  }
  return Socket();
}

IoStatus send_all(const Socket& s, const void* buf, size_t n, Clock::time_point deadline, int* err) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t k = ::send(s.fd(), p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!wait_fd(s.fd(), POLLOUT, deadline)) return IoStatus::Timeout;
      continue;
    }
    if (k < 0 && (errno == EPIPE || errno == ECONNRESET)) return IoStatus::Closed;
    *err = errno;
    return IoStatus::Error;
  }
  return IoStatus::Ok;
}

IoStatus recv_all(const Socket& s, void* buf, size_t n, Clock::time_point deadline, int* err) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t k = ::recv(s.fd(), p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return IoStatus::Closed;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_fd(s.fd(), POLLIN, deadline)) return IoStatus::Timeout;
      continue;
    }
    if (errno == ECONNRESET) return IoStatus::Closed;
    *err = errno;
    return IoStatus::Error;
  }
  return IoStatus::Ok;
}

}  // namespace dp::ring
