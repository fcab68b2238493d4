#include "collectives/bootstrap/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "base/error.h"
#include "runtime/log.h"

namespace dp {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {

using Clock = std::chrono::steady_clock;

enum Op : uint8_t { kHello = 1, kTxn = 2, kBye = 3, kTxnReport = 4 };
enum Status : uint8_t { kOk = 0, kTimeout = 1, kLost = 2, kError = 3, kClosing = 4 };
constexpr uint32_t kMaxFrame = 1u << 30;  // 1 GiB: a bootstrap blob is far smaller
constexpr double kReplyMargin_s = 10;     // how much longer than its own deadline a client waits
constexpr auto kLinger = std::chrono::seconds(2);  // see the stop path of TcpStoreServer::Impl::loop

// ---- encoding ----
void put_u8(std::string& s, uint8_t v) { s.push_back(static_cast<char>(v)); }
void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_i32(std::string& s, int32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
void put_str(std::string& s, const std::string& v) {
  put_u32(s, static_cast<uint32_t>(v.size()));
  s += v;
}
void put_bytes(std::string& s, const std::string& v) {
  put_u64(s, v.size());
  s += v;
}
std::string framed(const std::string& body) {
  std::string f;
  f.reserve(body.size() + 4);
  put_u32(f, static_cast<uint32_t>(body.size()));
  f += body;
  return f;
}

struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint32_t u32() { return scalar<uint32_t>(); }
  int32_t i32() { return scalar<int32_t>(); }
  uint64_t u64() { return scalar<uint64_t>(); }
  std::string str() {
    uint32_t n = u32();
    return std::string(take(n), n);
  }
  std::string bytes() {
    uint64_t n = u64();
    if (n > s_.size()) throw ProtocolError("length beyond the frame");
    return std::string(take(n), n);
  }

 private:
  template <class T>
  T scalar() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  const char* take(size_t n) {
    if (n > s_.size() - off_) throw ProtocolError("truncated frame");
    const char* p = s_.data() + off_;
    off_ += n;
    return p;
  }
  const std::string& s_;
  size_t off_ = 0;
};

std::string sys_error(int err) { return fmt::format("{} (errno {})", std::strerror(err), err); }

std::string fmt_seconds(double s) { return fmt::format("{:g} s", s); }

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head) ::freeaddrinfo(head);
  }
};

// getaddrinfo for a TCP endpoint; returns "" on success, else the resolver's error text.
std::string resolve(const std::string& host, int port, bool passive, AddrInfoList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.head);
  if (rc != 0) return fmt::format("cannot resolve '{}': {}", host, ::gai_strerror(rc));
  return "";
}

int ms_until(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms + 1, 0, 1 << 30));
}

}  // namespace

// ===================================== server =====================================

struct TcpStoreServer::Impl {
  struct Conn {
    UniqueFd fd;
    std::string in, out;
    size_t out_off = 0;
    int rank = -1;
    bool said_bye = false, closed = false;
    bool waiting = false;
    bool report_only = false;  // its deadline passing is a progress report, not a failure
    std::vector<std::string> wait_keys;
    Clock::time_point deadline;
  };

  std::string who;
  int world_size = 0;
  int port = 0;
  UniqueFd listen_fd, wake_r, wake_w;
  std::atomic<bool> stop{false};
  std::thread thread;
  double flush_timeout_s = 10;

  std::vector<std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, std::string> kv;
  std::set<int> lost;
  std::string fatal;  // once set, every request is answered with this error
  bool timed_out = false;

  void run() noexcept {
    try {
      loop();
    } catch (const std::exception& e) {
      // A background thread never lets an exception escape: the clients see their connection
      // close and report it; the cause goes to the log.
      log::get("coll")->error("{}: the TCP store thread failed: {}", who, e.what());
    }
    conns.clear();
  }

  void loop() {
    std::vector<pollfd> pfds;
    char buf[1 << 16];
    std::optional<Clock::time_point> linger_until;
    while (true) {
      if (stop.load()) {
        // After a failure (a lost rank, a timeout, a poisoned store) rank 0 lingers a moment so
        // that the others hear what the store knows instead of "connection lost"; otherwise it
        // stops at once.
        const bool failure = !lost.empty() || !fatal.empty() || timed_out;
        if (!linger_until) linger_until = Clock::now() + kLinger;
        const bool others_here = std::any_of(conns.begin(), conns.end(),
                                             [](const auto& c) { return !c->closed && !c->said_bye; });
        if (!failure || !others_here || Clock::now() >= *linger_until) break;
      }
      pfds.clear();
      pfds.push_back({wake_r.get(), POLLIN, 0});
      pfds.push_back({listen_fd.get(), POLLIN, 0});
      const size_t nconn = conns.size();
      for (auto& c : conns)
        pfds.push_back({c->fd.get(), static_cast<short>(POLLIN | (c->out_off < c->out.size() ? POLLOUT : 0)), 0});
      int timeout_ms = next_timeout_ms();
      if (linger_until) timeout_ms = timeout_ms < 0 ? ms_until(*linger_until) : std::min(timeout_ms, ms_until(*linger_until));
      int rc = ::poll(pfds.data(), pfds.size(), timeout_ms);
      if (rc < 0) {
        if (errno == EINTR) continue;
        CHECK_SYS(rc);
      }
      if (pfds[0].revents) {
        while (::read(wake_r.get(), buf, sizeof buf) > 0) {
        }
      }
      if (pfds[1].revents & POLLIN) accept_all();
      for (size_t i = 0; i < nconn; ++i) {
        Conn& c = *conns[i];
        const short ev = pfds[i + 2].revents;
        if (ev & (POLLIN | POLLHUP | POLLERR)) read_conn(c, buf, sizeof buf);
        if (!c.closed && (ev & POLLOUT)) flush(c);
      }
      expire_waits();
      for (size_t i = 0; i < nconn; ++i)
        if (!conns[i]->closed && !conns[i]->waiting && !conns[i]->in.empty()) process_frames(*conns[i]);
      reap();
    }
    drain_and_close();
  }

  int next_timeout_ms() const {
    int t = -1;
    for (const auto& c : conns)
      if (c->waiting) {
        int ms = ms_until(c->deadline);
        t = t < 0 ? ms : std::min(t, ms);
      }
    return t;
  }

  void accept_all() {
    while (true) {
      int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        return;  // EAGAIN, or a connection reset before we took it
      }
      set_nodelay(fd);
      auto c = std::make_unique<Conn>();
      c->fd = UniqueFd(fd);
      conns.push_back(std::move(c));
    }
  }

  void read_conn(Conn& c, char* buf, size_t cap) {
    bool eof = false;
    while (true) {
      ssize_t n = ::recv(c.fd.get(), buf, cap, 0);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) eof = true;
      else if (errno == EINTR) continue;
      else if (errno != EAGAIN && errno != EWOULDBLOCK) eof = true;  // reset: treat as closed
      break;
    }
    process_frames(c);
    if (eof) close_conn(c);
  }

  // Handles the complete requests buffered for `c`; one at a time (a waiter is answered before
  // its next request is looked at: clients never pipeline, this is only defensive).
  void process_frames(Conn& c) {
    try {
      size_t off = 0;
      while (!c.closed && !c.waiting && c.in.size() - off >= 4) {
        uint32_t len;
        std::memcpy(&len, c.in.data() + off, 4);
        if (len > kMaxFrame) throw ProtocolError(fmt::format("frame of {} bytes", len));
        if (c.in.size() - off - 4 < len) break;
        std::string body = c.in.substr(off + 4, len);
        off += 4 + size_t{len};
        handle(c, body);
      }
      c.in.erase(0, off);
    } catch (const ProtocolError& e) {
      log::get("coll")->warn("{}: TCP store: dropping a client that sent a malformed request ({})", who, e.what());
      close_conn(c);
    }
  }

  void handle(Conn& c, const std::string& body) {
    Reader r(body);
    switch (r.u8()) {
      case kHello: {
        const int rank = r.i32(), ws = r.i32();
        if (fatal.empty()) {
          if (ws != world_size)
            poison(fmt::format("inconsistent world size: rank {} was started with a world of {} processes, "
                               "rank 0 (serving the TCP store) with {}; start every process with the same world size",
                               rank, ws, world_size));
          else if (rank < 0 || rank >= world_size)
            poison(fmt::format("a process says it is rank {}, outside the world of {}", rank, world_size));
          else if (std::any_of(conns.begin(), conns.end(),
                               [&](const auto& o) { return o.get() != &c && !o->closed && o->rank == rank; }))
            poison(fmt::format("two processes say they are rank {} (check each process's rank variable)", rank));
        }
        c.rank = rank;
        std::string reply;
        if (fatal.empty()) put_u8(reply, kOk);
        else {
          put_u8(reply, kError);
          put_str(reply, fatal);
        }
        send(c, reply);
        return;
      }
      case kTxn:
      case kTxnReport: {
        c.report_only = body[0] == kTxnReport;
        const uint32_t timeout_ms = r.u32();
        const uint32_t ndel = r.u32();
        for (uint32_t i = 0; i < ndel; ++i) kv.erase(r.str());
        const uint32_t nset = r.u32();
        for (uint32_t i = 0; i < nset; ++i) {
          std::string k = r.str();
          kv[std::move(k)] = r.bytes();
        }
        const uint32_t nwait = r.u32();
        c.wait_keys.clear();
        for (uint32_t i = 0; i < nwait; ++i) c.wait_keys.push_back(r.str());
        c.waiting = true;
        c.deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
        answer_waits();
        return;
      }
      case kBye:
        c.said_bye = true;  // no reply: the client closes right after
        return;
      default:
        throw ProtocolError("unknown request");
    }
  }

  void poison(std::string msg) {
    fatal = std::move(msg);
    log::get("coll")->error("{}: {}", who, fatal);
    answer_waits();
  }

  // Answers every waiter that can be answered now: the error, its values, or "lost".
  void answer_waits() {
    for (auto& cp : conns) {
      Conn& c = *cp;
      if (!c.waiting || c.closed) continue;
      std::string reply;
      if (!fatal.empty()) {
        put_u8(reply, kError);
        put_str(reply, fatal);
      } else if (std::all_of(c.wait_keys.begin(), c.wait_keys.end(), [&](const auto& k) { return kv.count(k) > 0; })) {
        size_t total = 1;
        for (const auto& k : c.wait_keys) total += 8 + kv[k].size();
        reply.reserve(total);
        put_u8(reply, kOk);
        for (const auto& k : c.wait_keys) put_bytes(reply, kv[k]);
      } else if (!lost.empty()) {
        put_u8(reply, kLost);
        put_presence(reply, c);
        put_u32(reply, static_cast<uint32_t>(lost.size()));
        for (int l : lost) put_i32(reply, l);
      } else {
        continue;
      }
      c.waiting = false;
      send(c, reply);
    }
  }

  void expire_waits() {
    const auto now = Clock::now();
    for (auto& cp : conns) {
      Conn& c = *cp;
      if (!c.waiting || c.closed || c.deadline > now) continue;
      std::string reply;
      put_u8(reply, kTimeout);
      put_presence(reply, c);
      timed_out = timed_out || !c.report_only;
      c.waiting = false;
      send(c, reply);
    }
  }

  void put_presence(std::string& reply, const Conn& c) {
    for (const auto& k : c.wait_keys) put_u8(reply, kv.count(k) ? 1 : 0);
  }

  void send(Conn& c, const std::string& body) {
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
    }
    c.out += framed(body);
    flush(c);
  }

  void flush(Conn& c) {
    while (c.out_off < c.out.size()) {
      ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out_off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      close_conn(c);
      return;
    }
  }

  void close_conn(Conn& c) {
    if (c.closed) return;
    c.closed = true;
    c.waiting = false;
    c.fd.reset();
    if (c.rank >= 0 && !c.said_bye && !stop.load()) {
      lost.insert(c.rank);
      log::get("coll")->warn("{}: rank {} left the TCP store without a goodbye (exited or crashed?)", who, c.rank);
      answer_waits();
    }
  }

  void reap() {
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const auto& c) { return c->closed; }), conns.end());
  }

  // On stop: send what is queued (bounded), then close every connection.
  void drain_and_close() {
    // Requests already here are answered too (and reading them avoids a reset on close).
    char buf[1 << 16];
    for (auto& cp : conns)
      if (!cp->closed) read_conn(*cp, buf, sizeof buf);
    for (auto& cp : conns) {
      Conn& c = *cp;
      if (!c.waiting || c.closed) continue;
      std::string reply;
      put_u8(reply, kClosing);
      put_presence(reply, c);
      c.waiting = false;
      send(c, reply);
    }
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(flush_timeout_s));
    std::vector<pollfd> pfds;
    while (Clock::now() < deadline) {
      pfds.clear();
      std::vector<Conn*> pending;
      for (auto& c : conns)
        if (!c->closed && c->out_off < c->out.size()) {
          pfds.push_back({c->fd.get(), POLLOUT, 0});
          pending.push_back(c.get());
        }
      if (pending.empty()) break;
      if (::poll(pfds.data(), pfds.size(), ms_until(deadline)) < 0 && errno != EINTR) break;
      for (size_t i = 0; i < pending.size(); ++i)
        if (pfds[i].revents) flush(*pending[i]);
    }
    conns.clear();
  }
};

TcpStoreServer::TcpStoreServer(const std::string& who, const std::string& host, int port, int world_size)
    : impl_(std::make_unique<Impl>()) {
  impl_->who = who;
  impl_->world_size = world_size;
  AddrInfoList ai;
  std::string err = resolve(host, port, /*passive=*/true, ai);
  if (!err.empty()) throw DpError(fmt::format("{}: rank 0 cannot serve the TCP store: {}", who, err));
  int last_errno = 0;
  for (addrinfo* a = ai.head; a && !impl_->listen_fd; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      last_errno = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0) {
      last_errno = errno;
      continue;
    }
    impl_->listen_fd = std::move(fd);
  }
  if (!impl_->listen_fd) {
    std::string hint = last_errno == EADDRINUSE    ? " (another process uses this port: choose a free port)"
                       : last_errno == EADDRNOTAVAIL ? " (the address is not one of this host's: rank 0 must run there)"
                                                     : "";
    throw DpError(fmt::format("{}: rank 0 cannot listen on {}:{} for the TCP store: {}{}", who,
                              host.empty() ? "*" : host, port,
                              sys_error(last_errno), hint));
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  CHECK_SYS(::getsockname(impl_->listen_fd.get(), reinterpret_cast<sockaddr*>(&ss), &len));
  impl_->port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  int pipefd[2];
  CHECK_SYS(::pipe2(pipefd, O_CLOEXEC | O_NONBLOCK));
  impl_->wake_r = UniqueFd(pipefd[0]);
  impl_->wake_w = UniqueFd(pipefd[1]);
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

TcpStoreServer::~TcpStoreServer() {
  impl_->stop.store(true);
  char c = 1;
  [[maybe_unused]] ssize_t n = ::write(impl_->wake_w.get(), &c, 1);
  impl_->thread.join();
}

int TcpStoreServer::port() const { return impl_->port; }

// ===================================== client =====================================

namespace {

// One try at every address of host:port; an empty UniqueFd (last_err says why) when none answers.
UniqueFd connect_once(const std::string& host, int port, Clock::time_point deadline, std::string& last_err) {
  AddrInfoList ai;
  last_err = resolve(host, port, /*passive=*/false, ai);
  for (addrinfo* a = ai.head; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      last_err = sys_error(errno);
      continue;
    }
    int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      // Bounded: an unreachable host would otherwise hold us for the kernel's SYN retries.
      pollfd p{fd.get(), POLLOUT, 0};
      rc = ::poll(&p, 1, std::min(ms_until(deadline), 5000));
      if (rc == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc != 0) {
      last_err = sys_error(errno);
      continue;
    }
    set_nodelay(fd.get());
    return fd;
  }
  return UniqueFd();
}

}  // namespace

TcpStoreClient::TcpStoreClient(const std::string& who, const std::string& host, int port, int rank, int world_size,
                               double timeout_s, double report_s)
    : who_(who), endpoint_(fmt::format("{}:{}", host, port)) {
  const auto start = Clock::now();
  auto next_report = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(report_s));
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  auto backoff = std::chrono::milliseconds(10);
  std::string last_err;
  while (!fd_) {
    fd_ = connect_once(host, port, deadline, last_err);
    if (fd_) break;
    if (Clock::now() + backoff >= deadline)
      throw DpError(fmt::format("{}: rank {} could not connect to the TCP store at {} (served by rank 0) within {}: "
                                "{}; is rank 0 running, and is the address right?",
                                who_, rank, endpoint_, fmt_seconds(timeout_s), last_err));
    if (Clock::now() >= next_report) {
      log::get("coll")->info("{}: rank {} waiting for the TCP store at {} (served by rank 0, which has not started "
                             "listening): {:.1f} s of {:g} s",
                             who_, rank, endpoint_, std::chrono::duration<double>(Clock::now() - start).count(),
                             timeout_s);
      next_report += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(report_s));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  std::string hello;
  put_u8(hello, kHello);
  put_i32(hello, rank);
  put_i32(hello, world_size);
  const double left = std::max(1.0, timeout_s - std::chrono::duration<double>(Clock::now() - start).count());
  send_frame(hello, left);
  std::string reply = recv_frame(left);
  Reader r(reply);
  uint8_t st = r.u8();
  if (st == kError) throw DpError(fmt::format("{}: {}", who_, r.str()));
  DP_CHECK(st == kOk, "{}: unexpected answer {} from the TCP store at {}", who_, st, endpoint_);
}

TcpStoreClient::~TcpStoreClient() {
  if (!fd_) return;
  try {
    std::string bye;
    put_u8(bye, kBye);
    send_frame(bye, 1.0);
  } catch (const std::exception&) {
    // The store is gone already: nothing to say goodbye to.
  }
}

void TcpStoreClient::send_frame(const std::string& body, double timeout_s) {
  const std::string f = framed(body);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  size_t off = 0;
  while (off < f.size()) {
    ssize_t n = ::send(fd_.get(), f.data() + off, f.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_.get(), POLLOUT, 0};
      if (::poll(&p, 1, ms_until(deadline)) == 0)
        throw DpError(fmt::format("{}: the TCP store at {} took no data for {} (is rank 0 stalled?)", who_,
                                  endpoint_, fmt_seconds(timeout_s)));
      continue;
    }
    throw DpError(fmt::format("{}: lost the connection to the TCP store at {} (rank 0 exited or crashed?): {}", who_,
                              endpoint_, sys_error(errno)));
  }
}

std::string TcpStoreClient::recv_frame(double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  // First the 4-byte length, then the body, each read into place.
  uint32_t len = 0;
  std::string body;
  auto read_into = [&](char* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      pollfd p{fd_.get(), POLLIN, 0};
      int rc = ::poll(&p, 1, ms_until(deadline));
      if (rc < 0 && errno == EINTR) continue;
      if (rc == 0)
        throw DpError(fmt::format("{}: no answer from the TCP store at {} within {} (is rank 0 stalled?)", who_,
                                  endpoint_, fmt_seconds(timeout_s)));
      ssize_t k = ::recv(fd_.get(), dst + got, n - got, 0);
      if (k > 0) {
        got += static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      throw DpError(fmt::format("{}: lost the connection to the TCP store at {} (rank 0 exited or crashed?){}", who_,
                                endpoint_, k == 0 ? "" : ": " + sys_error(errno)));
    }
  };
  read_into(reinterpret_cast<char*>(&len), 4);
  DP_CHECK(len <= kMaxFrame, "{}: frame of {} bytes from the TCP store at {}", who_, len, endpoint_);
  body.resize(len);
  read_into(body.data(), len);
  return body;
}

TcpStoreClient::Result TcpStoreClient::transact(const std::vector<std::string>& del,
                                                const std::vector<std::pair<std::string, std::string>>& set,
                                                const std::vector<std::string>& wait, double timeout_s,
                                                bool report_only) {
  std::string body;
  size_t total = 64;
  for (const auto& [k, v] : set) total += k.size() + v.size() + 12;
  body.reserve(total);
  put_u8(body, report_only ? kTxnReport : kTxn);
  put_u32(body, static_cast<uint32_t>(std::clamp(timeout_s * 1000.0, 0.0, 2e9)));
  put_u32(body, static_cast<uint32_t>(del.size()));
  for (const auto& k : del) put_str(body, k);
  put_u32(body, static_cast<uint32_t>(set.size()));
  for (const auto& [k, v] : set) {
    put_str(body, k);
    put_bytes(body, v);
  }
  put_u32(body, static_cast<uint32_t>(wait.size()));
  for (const auto& k : wait) put_str(body, k);
  send_frame(body, timeout_s + kReplyMargin_s);
  const std::string reply = recv_frame(timeout_s + kReplyMargin_s);
  Reader r(reply);
  Result res;
  try {
    switch (r.u8()) {
      case kOk:
        for (size_t i = 0; i < wait.size(); ++i) res.values.push_back(r.bytes());
        return res;
      case kTimeout:
      case kLost:
      case kClosing: {
        res.status = reply[0] == kTimeout ? Result::Timeout : reply[0] == kLost ? Result::Lost : Result::Closing;
        for (size_t i = 0; i < wait.size(); ++i) res.present.push_back(r.u8() != 0);
        if (res.status == Result::Lost) {
          const uint32_t n = r.u32();
          for (uint32_t i = 0; i < n; ++i) res.lost_ranks.push_back(r.i32());
        }
        return res;
      }
      case kError:
        throw DpError(fmt::format("{}: {}", who_, r.str()));
      default:
        break;
    }
  } catch (const ProtocolError& e) {
    throw DpError(fmt::format("{}: malformed answer from the TCP store at {}: {}", who_, endpoint_, e.what()));
  }
  throw DpError(fmt::format("{}: unknown answer from the TCP store at {}", who_, endpoint_));
}

}  // namespace dp
