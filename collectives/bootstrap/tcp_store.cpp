#include "collectives/bootstrap/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
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
#include "collectives/bootstrap/job_token.h"
#include "collectives/bootstrap/tcp_store_wire.h"
#include "runtime/log.h"
#include "runtime/tunables.h"

namespace dp {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

StoreLimits StoreLimits::from_tunables() {
  const Tunables t = tunables();
  StoreLimits l;
  l.max_frame = static_cast<size_t>(t.integer(Tunable::StoreMaxFrameBytes));
  l.max_pending = static_cast<int>(t.integer(Tunable::StoreMaxPending));
  l.handshake_s = t.number(Tunable::StoreHandshakeS);
  return l;
}

namespace {

using namespace store_wire;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kMaxReplyFrame = 1u << 30;      // what a client accepts from its (proved) store
constexpr double kReplyMargin_s = 10;              // how much longer than its own deadline a client waits
constexpr auto kLinger = std::chrono::seconds(2);  // see the stop path of TcpStoreServer::Impl::loop
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after accept failed for want of descriptors
constexpr size_t kReadChunk = 1 << 16;

std::string sys_error(int err) { return fmt::format("{} (errno {})", std::strerror(err), err); }

std::string fmt_seconds(double s) { return fmt::format("{:g} s", s); }

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// A member's connection lives as long as the job: keepalive probes notice a peer host that
// vanished (power, link) within about a minute, while no request is outstanding.
void set_keepalive(int fd) {
  int one = 1, idle = 30, intvl = 10, cnt = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
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

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return fmt::format("{}:{}", host, port);
}

std::string this_host() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// Blocking read of one frame of at most `cap` bytes before the deadline, for the short-lived
// probe below; "" on any failure.
std::string read_small_frame(int fd, Clock::time_point deadline, size_t cap) {
  std::string got;
  while (true) {
    if (got.size() >= 4) {
      const uint32_t len = frame_length(got.data());
      if (len > cap) return "";
      if (got.size() >= 4 + size_t{len}) return got.substr(4, len);
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms_until(deadline)) <= 0) return "";
    char buf[1024];
    ssize_t k = ::recv(fd, buf, sizeof buf, 0);
    if (k <= 0) return "";
    got.append(buf, static_cast<size_t>(k));
  }
}

// When rank 0 cannot bind its port: whether a dptrain store already serves it, and whose.
std::string describe_store_at(const std::string& host, int port) {
  AddrInfoList ai;
  if (!resolve(host.empty() ? "127.0.0.1" : host, port, false, ai).empty() || !ai.head) return "";
  UniqueFd fd(::socket(ai.head->ai_family, ai.head->ai_socktype | SOCK_CLOEXEC, ai.head->ai_protocol));
  if (!fd || ::connect(fd.get(), ai.head->ai_addr, ai.head->ai_addrlen) != 0) return "";
  const std::string body = read_small_frame(fd.get(), Clock::now() + std::chrono::milliseconds(500),
                                            kMaxHandshakeFrame);
  try {
    const Challenge c = parse_challenge(body);
    return fmt::format("the TCP store of another dptrain job{} (its rank 0 is {})",
                       c.job_id.empty() ? "" : " (job " + c.job_id + ")", c.owner);
  } catch (const ProtocolError&) {
    return "";
  }
}

}  // namespace

// ===================================== server =====================================

struct TcpStoreServer::Impl {
  struct Conn {
    UniqueFd fd;
    std::string peer;             // address:port, for messages about strangers
    std::string in, out;
    size_t out_off = 0;
    bool proved = false;          // answered the challenge (or the job has no token) and said hello
    std::string nonce;            // this connection's challenge
    Clock::time_point handshake_deadline;
    bool close_after_flush = false;  // refused: tell it why, then close
    int rank = -1;
    bool said_bye = false, closed = false;
    bool waiting = false;
    bool report_only = false;  // its deadline passing is a progress report, not a failure
    std::vector<std::string> wait_keys;
    Clock::time_point deadline;
  };

  std::string who, token, id, owner;
  int world_size = 0;
  int port = 0;
  StoreLimits limits;
  UniqueFd listen_fd, wake_r, wake_w;
  std::atomic<bool> stop{false};
  std::thread thread;
  double flush_timeout_s = 10;

  std::vector<std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, std::string> kv;
  std::set<int> lost;
  std::vector<bool> joined;  // [rank]: said hello once
  int joined_count = 0;
  std::string fatal;  // once set, every request is answered with this error
  bool timed_out = false;
  std::optional<Clock::time_point> accept_paused_until;
  int refusals = 0;  // strangers refused: the first few are logged one by one

  void run() noexcept {
    ::pthread_setname_np(::pthread_self(), "dp-store");
    try {
      loop();
    } catch (const std::exception& e) {
      // A background thread never lets an exception escape: the clients see their connection
      // close and report it; the cause goes to the log.
      log::get("coll")->error("{}: the TCP store thread failed: {}", who, e.what());
    }
    conns.clear();
  }

  bool should_stop(std::optional<Clock::time_point>& linger_until) {
    if (!stop.load()) return false;
    // After a failure (a lost rank, a timeout, a poisoned store) rank 0 lingers a moment so that
    // the others hear what the store knows instead of "connection lost"; otherwise it stops at once.
    const bool failure = !lost.empty() || !fatal.empty() || timed_out;
    if (!linger_until) linger_until = Clock::now() + kLinger;
    const bool others_here = std::any_of(conns.begin(), conns.end(), [](const auto& c) {
      return !c->closed && c->proved && !c->said_bye;
    });
    return !failure || !others_here || Clock::now() >= *linger_until;
  }

  void loop() {
    std::vector<pollfd> pfds;
    std::optional<Clock::time_point> linger_until;
    while (!should_stop(linger_until)) {
      pfds.clear();
      pfds.push_back({wake_r.get(), POLLIN, 0});
      const bool listening = !accept_paused_until || Clock::now() >= *accept_paused_until;
      pfds.push_back({listening ? listen_fd.get() : -1, POLLIN, 0});
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
        char buf[64];
        while (::read(wake_r.get(), buf, sizeof buf) > 0) {
        }
      }
      if (pfds[1].revents & POLLIN) accept_all();
      for (size_t i = 0; i < nconn; ++i) {
        Conn& c = *conns[i];
        const short ev = pfds[i + 2].revents;
        if (ev & (POLLIN | POLLHUP | POLLERR)) read_conn(c);
        if (!c.closed && (ev & POLLOUT)) flush(c);
      }
      expire();
      for (size_t i = 0; i < nconn; ++i)
        if (!conns[i]->closed && !conns[i]->waiting && !conns[i]->in.empty()) process_frames(*conns[i]);
      reap();
    }
    drain_and_close();
  }

  int next_timeout_ms() const {
    std::optional<Clock::time_point> t;
    auto consider = [&](Clock::time_point d) { t = t ? std::min(*t, d) : d; };
    for (const auto& c : conns) {
      if (c->closed) continue;
      if (c->waiting) consider(c->deadline);
      if (!c->proved) consider(c->handshake_deadline);
    }
    if (accept_paused_until) consider(*accept_paused_until);
    return t ? ms_until(*t) : -1;
  }

  int pending() const {
    return static_cast<int>(std::count_if(conns.begin(), conns.end(), [](const auto& c) {
      return !c->closed && !c->proved;
    }));
  }

  void accept_all() {
    while (true) {
      int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // The connection stays in the backlog: polling the listener again now would spin.
          accept_paused_until = Clock::now() + kAcceptPause;
          log::get("coll")->warn("{}: TCP store: cannot accept a connection: {}; pausing for {} ms", who,
                                 sys_error(errno), kAcceptPause.count());
        }
        return;  // EAGAIN, or a connection reset before we took it
      }
      accept_paused_until.reset();
      if (pending() >= limits.max_pending) evict_oldest_pending();
      set_nodelay(fd);
      auto c = std::make_unique<Conn>();
      c->fd = UniqueFd(fd);
      c->peer = peer_name(fd);
      c->nonce = random_bytes(kNonceBytes);
      c->handshake_deadline = Clock::now() + seconds(limits.handshake_s);
      Challenge ch{!token.empty(), c->nonce, id, owner};
      send(*c, encode_challenge(ch));
      conns.push_back(std::move(c));
    }
  }

  void evict_oldest_pending() {
    for (auto& c : conns)
      if (!c->closed && !c->proved) {
        log::get("coll")->debug("{}: TCP store: closing {} (too many connections proving no token)", who, c->peer);
        close_conn(*c);
        return;
      }
  }

  // The most a connection may have buffered: one frame (a member never sends ahead of answers).
  size_t in_cap(const Conn& c) const { return 4 + (c.proved ? limits.max_frame : kMaxHandshakeFrame); }

  void read_conn(Conn& c) {
    char buf[kReadChunk];
    bool eof = false;
    while (!c.closed) {
      ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        if (!c.waiting) process_frames(c);
        if (!c.closed && c.in.size() > in_cap(c)) {
          drop(c, fmt::format("sent {} bytes ahead of an answer", c.in.size()));
          return;
        }
        continue;
      }
      if (n == 0) eof = true;
      else if (errno == EINTR) continue;
      else if (errno != EAGAIN && errno != EWOULDBLOCK) eof = true;  // reset: treat as closed
      break;
    }
    if (eof) close_conn(c);
  }

  void drop(Conn& c, const std::string& why) {
    log::get("coll")->warn("{}: TCP store: dropping {}{} ({})", who,
                           c.rank >= 0 ? fmt::format("rank {} at ", c.rank) : std::string("a client at "), c.peer, why);
    close_conn(c);
  }

  // Handles the complete requests buffered for `c`; one at a time (a waiter is answered before
  // its next request is looked at: clients never pipeline). A declared length over the limit
  // drops the connection as soon as its 4 bytes are here, before the body is buffered.
  void process_frames(Conn& c) {
    try {
      size_t off = 0;
      while (!c.closed && !c.waiting && !c.close_after_flush && c.in.size() - off >= 4) {
        const uint32_t len = frame_length(c.in.data() + off);
        if (len > in_cap(c) - 4)
          throw ProtocolError(fmt::format("a frame of {} bytes, over the limit of {}{}", len, in_cap(c) - 4,
                                          c.proved ? " (DPTRAIN_STORE_MAX_FRAME_BYTES)" : " before the token"));
        if (c.in.size() - off - 4 < len) break;
        std::string body = c.in.substr(off + 4, len);
        off += 4 + size_t{len};
        handle(c, parse_request(body));
      }
      c.in.erase(0, off);
      if (c.in.capacity() > (1u << 20) && c.in.size() < (1u << 16)) c.in.shrink_to_fit();
    } catch (const ProtocolError& e) {
      drop(c, fmt::format("a malformed request: {}", e.what()));
    }
  }

  void handle(Conn& c, const Request& q) {
    if (!c.proved && q.op != kHello) throw ProtocolError("a request before the hello");
    switch (q.op) {
      case kHello:
        if (c.proved) throw ProtocolError("a second hello");
        return hello(c, q);
      case kTxn:
        return transact(c, q);
      case kBye:
        c.said_bye = true;  // no reply: the client closes right after
        return;
      case kTxnReport:  // parse_request reads it as a kTxn with report_only set
        throw ProtocolError("a report request the parser did not read as a transaction");
    }
  }

  // A stranger is told why and closed: it never becomes a rank, so it can neither poison the
  // store nor be counted as lost.
  void refuse(Conn& c, const std::string& to_client, const std::string& for_log) {
    if (++refusals <= 5)
      log::get("coll")->warn("{}: TCP store: refused a connection from {}: {}{}", who, c.peer, for_log,
                             refusals == 5 ? " (further refusals are logged at debug level)" : "");
    else
      log::get("coll")->debug("{}: TCP store: refused a connection from {}: {}", who, c.peer, for_log);
    std::string reply;
    put_u8(reply, kError);
    put_str(reply, to_client);
    c.close_after_flush = true;
    send(c, reply);
  }

  // The client proved the token (when the job has one); returns false after refusing it.
  bool check_proof(Conn& c, const Request& q) {
    if (token.empty()) return true;
    const std::string theirs = q.job_id.empty() ? "no job token" : "job " + q.job_id;
    if (q.mac.empty()) {
      refuse(c, fmt::format("this TCP store belongs to job {} and requires its job token (DPTRAIN_JOB_TOKEN); "
                            "this process has none",
                            id),
             fmt::format("it has no job token (it claimed rank {})", q.rank));
      return false;
    }
    if (q.nonce.size() != kNonceBytes || !same_bytes(q.mac, token_proof(token, "store-client", c.nonce, q.nonce))) {
      refuse(c, fmt::format("this TCP store belongs to job {}, not to {} (its rank 0 is {}): two jobs share "
                            "the port, or their DPTRAIN_JOB_TOKEN differs",
                            id, theirs, owner),
             fmt::format("its proof of the job token is wrong ({}, claimed rank {}): another job on this port?",
                         theirs, q.rank));
      return false;
    }
    return true;
  }

  void hello(Conn& c, const Request& q) {
    if (!check_proof(c, q)) return;
    const int rank = q.rank, ws = q.world_size;
    const bool started = joined_count == world_size;  // every rank has joined once
    std::string problem;
    if (ws != world_size)
      problem = fmt::format("inconsistent world size: rank {} was started with a world of {} processes, rank 0 "
                            "(serving the TCP store) with {}; start every process with the same world size",
                            rank, ws, world_size);
    else if (rank < 0 || rank >= world_size)
      problem = fmt::format("a process says it is rank {}, outside the world of {}", rank, world_size);
    else if (std::any_of(conns.begin(), conns.end(),
                         [&](const auto& o) { return o.get() != &c && !o->closed && o->rank == rank; }))
      problem = fmt::format("two processes say they are rank {} (check each process's rank variable)", rank);
    if (!problem.empty() && started) {
      // The job runs: the newcomer is the odd one out; the job is not disturbed.
      refuse(c, problem + "; this job's ranks have all joined already, so this process is refused", problem);
      return;
    }
    if (!problem.empty() && fatal.empty()) poison(problem);
    c.proved = true;
    c.rank = rank;
    set_keepalive(c.fd.get());
    if (problem.empty() && !joined[static_cast<size_t>(rank)]) {
      joined[static_cast<size_t>(rank)] = true;
      ++joined_count;
    }
    std::string reply;
    if (fatal.empty()) {
      put_u8(reply, kOk);
      put_str(reply, token.empty() ? std::string() : token_proof(token, "store-server", q.nonce, c.nonce));
    } else {
      put_u8(reply, kError);
      put_str(reply, fatal);
    }
    send(c, reply);
  }

  void transact(Conn& c, const Request& q) {
    for (const auto& k : q.del) kv.erase(k);
    for (const auto& [k, v] : q.set) kv[k] = v;
    c.wait_keys = q.wait;
    c.report_only = q.report_only;
    c.waiting = true;
    c.deadline = Clock::now() + std::chrono::milliseconds(q.timeout_ms);
    answer_waits();
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

  // Waits past their deadline are answered TIMEOUT; connections that did not prove the token in
  // time (silent, half-open, or refused but not reading) are closed.
  void expire() {
    const auto now = Clock::now();
    for (auto& cp : conns) {
      Conn& c = *cp;
      if (c.closed) continue;
      if (!c.proved && c.handshake_deadline <= now) {
        log::get("coll")->debug("{}: TCP store: closing {}: no hello within {:g} s", who, c.peer, limits.handshake_s);
        close_conn(c);
        continue;
      }
      if (!c.waiting || c.deadline > now) continue;
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
    if (c.close_after_flush) close_conn(c);
  }

  void close_conn(Conn& c) {
    if (c.closed) return;
    c.closed = true;
    c.waiting = false;
    c.fd.reset();
    if (c.proved && c.rank >= 0 && !c.said_bye && !stop.load()) {
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
    for (auto& cp : conns)
      if (!cp->closed) read_conn(*cp);
    for (auto& cp : conns) {
      Conn& c = *cp;
      if (!c.waiting || c.closed) continue;
      std::string reply;
      put_u8(reply, kClosing);
      put_presence(reply, c);
      c.waiting = false;
      send(c, reply);
    }
    const auto deadline = Clock::now() + seconds(flush_timeout_s);
    std::vector<pollfd> pfds;
    while (Clock::now() < deadline) {
      pfds.clear();
      std::vector<Conn*> pending;
      for (auto& c : conns)
        if (!c->closed && c->proved && c->out_off < c->out.size()) {
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

namespace {
// Binds and listens on one of host's addresses; returns the errno of the last failure.
int bind_listener(const std::string& host, int port, UniqueFd& out, int backlog) {
  AddrInfoList ai;
  std::string err = resolve(host, port, /*passive=*/true, ai);
  if (!err.empty()) throw DpError(err);
  int last_errno = 0;
  for (addrinfo* a = ai.head; a && !out; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      last_errno = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      last_errno = errno;
      continue;
    }
    out = std::move(fd);
  }
  return last_errno;
}
}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& who, const std::string& host, int port, int world_size,
                               const std::string& token, const StoreLimits& limits)
    : impl_(std::make_unique<Impl>()) {
  impl_->who = who;
  impl_->world_size = world_size;
  impl_->token = token;
  impl_->id = job_id(token);
  impl_->owner = fmt::format("pid {} on host {}", ::getpid(), this_host());
  impl_->limits = limits;
  impl_->joined.assign(static_cast<size_t>(world_size), false);
  int last_errno = 0;
  try {
    last_errno = bind_listener(host, port, impl_->listen_fd, 1024);
  } catch (const DpError& e) {
    throw DpError(fmt::format("{}: rank 0 cannot serve the TCP store: {}", who, e.what()));
  }
  if (!impl_->listen_fd) {
    std::string hint = last_errno == EADDRNOTAVAIL ? " (the address is not one of this host's: rank 0 must run there)"
                                                   : "";
    if (last_errno == EADDRINUSE) {
      const std::string other = describe_store_at(host, port);
      hint = other.empty() ? " (another process uses this port: choose a free port)"
                           : fmt::format(" (it is {}: give each job its own MASTER_PORT)", other);
    }
    throw DpError(fmt::format("{}: rank 0 cannot listen on {}:{} for the TCP store: {}{}", who,
                              host.empty() ? "*" : host, port, sys_error(last_errno), hint));
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

TcpStoreClient::TcpStoreClient(const std::string& who, const std::string& host, int port, int rank, int world_size,
                               double timeout_s, const std::string& token, double report_s)
    : who_(who), endpoint_(fmt::format("{}:{}", host, port)) {
  const auto start = Clock::now();
  const auto deadline = start + seconds(timeout_s);
  auto next_report = start + seconds(report_s);
  auto backoff = std::chrono::milliseconds(10);
  std::string last_err;
  while (true) {
    if (connect_once(host, port, deadline, last_err)) {
      const double left = std::max(1.0, timeout_s - std::chrono::duration<double>(Clock::now() - start).count());
      if (introduce(rank, world_size, token, left, last_err)) return;
      fd_.reset();
    }
    if (Clock::now() + backoff >= deadline)
      throw DpError(fmt::format("{}: rank {} could not connect to the TCP store at {} (served by rank 0) within {}: "
                                "{}; is rank 0 running, and is the address right?",
                                who_, rank, endpoint_, fmt_seconds(timeout_s), last_err));
    if (Clock::now() >= next_report) {
      log::get("coll")->info("{}: rank {} waiting for the TCP store at {} (served by rank 0, which has not started "
                             "listening): {:.1f} s of {:g} s",
                             who_, rank, endpoint_, std::chrono::duration<double>(Clock::now() - start).count(),
                             timeout_s);
      next_report += seconds(report_s);
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

bool TcpStoreClient::connect_once(const std::string& host, int port, Clock::time_point deadline,
                                  std::string& last_err) {
  AddrInfoList ai;
  last_err = resolve(host, port, /*passive=*/false, ai);
  for (addrinfo* a = ai.head; a && !fd_; a = a->ai_next) {
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
    fd_ = std::move(fd);
  }
  return static_cast<bool>(fd_);
}

bool TcpStoreClient::introduce(int rank, int world_size, const std::string& token, double timeout_s,
                               std::string& last_err) {
  Challenge ch;
  try {
    ch = parse_challenge(recv_frame(timeout_s));
  } catch (const ProtocolError& e) {
    throw DpError(fmt::format("{}: {} is not a dptrain TCP store of this version: {}", who_, endpoint_, e.what()));
  } catch (const DpError& e) {
    last_err = "the store closed the connection during the greeting (it sheds connections under load)";
    return false;  // closed before the greeting: shed under a flood, or rank 0 restarting
  }
  const std::string mine = job_id(token);
  if (ch.token_required && token.empty())
    throw DpError(fmt::format("{}: the TCP store at {} belongs to job {} (its rank 0 is {}) and requires the job "
                              "token; this process has none: set DPTRAIN_JOB_TOKEN to the job's token, or give this "
                              "job its own MASTER_PORT",
                              who_, endpoint_, ch.job_id, ch.owner));
  if (!ch.token_required && !token.empty())
    throw DpError(fmt::format("{}: the TCP store at {} (its rank 0 is {}) has no job token while this process has "
                              "one (job {}): it is another job's store, or DPTRAIN_JOB_TOKEN is set for some ranks "
                              "only",
                              who_, endpoint_, ch.owner, mine));
  if (ch.job_id != mine)
    throw DpError(fmt::format("{}: the TCP store at {} belongs to another job (job {}, its rank 0 is {}); this "
                              "process is of job {}: give each job its own MASTER_PORT, and every process of a job "
                              "the same DPTRAIN_JOB_TOKEN",
                              who_, endpoint_, ch.job_id, ch.owner, mine));
  const std::string nonce = random_bytes(kNonceBytes);
  const std::string mac = token.empty() ? std::string() : token_proof(token, "store-client", ch.nonce, nonce);
  send_frame(encode_hello(rank, world_size, nonce, mac, mine), timeout_s);
  Reply a;
  try {
    a = parse_reply(recv_frame(timeout_s), /*hello=*/true, 0);
  } catch (const ProtocolError& e) {
    throw DpError(fmt::format("{}: malformed answer from the TCP store at {}: {}", who_, endpoint_, e.what()));
  }
  if (a.status == kError) throw DpError(fmt::format("{}: {}", who_, a.message));
  if (!token.empty() && !same_bytes(a.proof, token_proof(token, "store-server", nonce, ch.nonce)))
    throw DpError(fmt::format("{}: the TCP store at {} could not prove the job token (an impostor?)", who_,
                              endpoint_));
  return true;
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
  const auto deadline = Clock::now() + seconds(timeout_s);
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
  const auto deadline = Clock::now() + seconds(timeout_s);
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
  if (len > kMaxReplyFrame)
    throw DpError(fmt::format("{}: the TCP store at {} sent a frame of {} bytes (over {}): not a dptrain store?", who_,
                              endpoint_, len, kMaxReplyFrame));
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
  Reply a;
  try {
    a = parse_reply(recv_frame(timeout_s + kReplyMargin_s), /*hello=*/false, wait.size());
  } catch (const ProtocolError& e) {
    throw DpError(fmt::format("{}: malformed answer from the TCP store at {}: {}", who_, endpoint_, e.what()));
  }
  Result res;
  switch (a.status) {
    case kOk: res.values = std::move(a.values); return res;
    case kTimeout: res.status = Result::Timeout; break;
    case kLost: res.status = Result::Lost; break;
    case kClosing: res.status = Result::Closing; break;
    case kError: throw DpError(fmt::format("{}: {}", who_, a.message));
  }
  res.present = std::move(a.present);
  res.lost_ranks.assign(a.lost_ranks.begin(), a.lost_ranks.end());
  return res;
}

}  // namespace dp
