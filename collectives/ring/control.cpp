#include "collectives/ring/control.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "runtime/log.h"

namespace dp::ring {
namespace {

constexpr uint32_t kMagic = 0x54435044;  // "DPCT"
enum : uint8_t { kQuery = 1, kStatus = 2, kAbort = 3, kBye = 4 };

struct Msg {
  uint32_t magic;
  uint8_t type;
  uint8_t pad[3];
  int32_t culprit;
  int32_t reporter;
  uint32_t text_len;
  uint32_t pad2;
  uint64_t a, b, c;
};
static_assert(sizeof(Msg) == 48);

constexpr size_t kMaxText = 4096;
// A control message is small and the peer's thread always reads: a second is plenty.
constexpr auto kSendBudget = std::chrono::seconds(1);

}  // namespace

ControlPlane::ControlPlane(int rank, int size, std::vector<Socket> control, std::function<void()> waker)
    : rank_(rank), size_(size), peers_(size), waker_(std::move(waker)), lost_(new std::atomic<bool>[size]) {
  for (int p = 0; p < size; ++p) lost_[p].store(false);
  for (int p = 0; p < size; ++p) {
    peers_[p].sock = std::move(control[p]);
    if (!peers_[p].sock) peers_[p].state.closed = true;  // self
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  CHECK_SYS(wake_fd_);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  CHECK_SYS(stop_fd_);
  thread_ = std::thread([this] { loop(); });
}

ControlPlane::~ControlPlane() {
  // A communicator that failed passes the failure on before its BYE (same socket, so it arrives
  // first): a peer that has not heard of the failure yet would otherwise blame this rank for
  // leaving ("rank 1 shut down its communicator") instead of naming the culprit.
  std::optional<Failure> failed;
  {
    std::lock_guard lock(mu_);
    if (!notices_sent_) failed = failure_;
  }
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (failed)
      send(p, kAbort, failed->culprit, failed->reporter, failed->seq, 0, 0, failed->reason.substr(0, kMaxText));
    send(p, kBye, -1, rank_, completed_.load(), 0, 0, "");
  }
  uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(wake_fd_);
  ::close(stop_fd_);
}

void ControlPlane::wake() const {
  events_.fetch_add(1, std::memory_order_acq_rel);
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  if (waker_) waker_();
}

void ControlPlane::drain_wake() const {
  uint64_t v;
  (void)!::read(wake_fd_, &v, sizeof v);
}

std::optional<Failure> ControlPlane::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

PeerStatus ControlPlane::peer_state(int peer) const {
  std::lock_guard lock(mu_);
  return peers_[peer].state;
}

Failure ControlPlane::fail(const Failure& f) {
  Failure winner;
  bool tell = false;
  {
    std::lock_guard lock(mu_);
    if (!failure_) failure_ = f;
    winner = *failure_;
    if (!notices_sent_ && winner.reporter == rank_) tell = notices_sent_ = true;
  }
  cv_.notify_all();
  wake();
  if (tell) {
    const std::string text = winner.reason.substr(0, kMaxText);
    for (int p = 0; p < size_; ++p)
      if (p != rank_) send(p, kAbort, winner.culprit, winner.reporter, winner.seq, 0, 0, text);
  }
  return winner;
}

void ControlPlane::entered(uint64_t seq, const Signature& sig) {
  {
    std::lock_guard lock(history_mu_);
    history_[seq % kSignatureHistory] = {seq, sig};
  }
  entered_.store(seq);
}

std::optional<Signature> ControlPlane::issued(uint64_t seq) {
  std::lock_guard lock(history_mu_);
  const auto& h = history_[seq % kSignatureHistory];
  if (seq == 0 || h.first != seq) return std::nullopt;
  return h.second;
}

std::vector<PeerStatus> ControlPlane::query_status(double wait_s, uint64_t about_seq) {
  uint64_t id;
  {
    std::lock_guard lock(mu_);
    id = ++query_id_;
    for (auto& p : peers_) p.state.answered = p.state.has_signature = false;
  }
  for (int p = 0; p < size_; ++p)
    if (p != rank_) send(p, kQuery, -1, rank_, id, about_seq, 0, "");
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(wait_s), [&] {
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && !peers_[p].state.answered && !peers_[p].state.closed) return false;
    return true;
  });
  std::vector<PeerStatus> out;
  for (auto& p : peers_) out.push_back(p.state);
  last_status_ = out;
  last_status_seq_ = about_seq;
  return out;
}

std::vector<PeerStatus> ControlPlane::last_status(uint64_t* about_seq) const {
  std::lock_guard lock(mu_);
  *about_seq = last_status_seq_;
  return last_status_;
}

void ControlPlane::await_peer_verdict(int peer, double wait_s) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(wait_s),
               [&] { return peers_[peer].state.closed || failure_.has_value(); });
}

bool ControlPlane::send(int peer, uint8_t type, int32_t culprit, int32_t reporter, uint64_t a, uint64_t b,
                        uint64_t c, const std::string& text) {
  Peer& p = peers_[peer];
  {
    std::lock_guard lock(mu_);
    if (p.state.closed) return false;
  }
  Msg m{};
  m.magic = kMagic;
  m.type = type;
  m.culprit = culprit;
  m.reporter = reporter;
  m.text_len = static_cast<uint32_t>(text.size());
  m.a = a;
  m.b = b;
  m.c = c;
  std::string wire(reinterpret_cast<const char*>(&m), sizeof m);
  wire += text;
  std::lock_guard lock(p.send_mu);
  int err = 0;
  // A failed send needs no handling here: the peer is gone or stuck, which its own control
  // connection (EOF) or the caller's timeout reports.
  return send_all(p.sock, wire.data(), wire.size(), Clock::now() + kSendBudget, &err) == IoStatus::Ok;
}

void ControlPlane::on_closed(int peer) {
  {
    std::lock_guard lock(mu_);
    peers_[peer].state.closed = true;
    if (!peers_[peer].state.said_bye) lost_[peer].store(true, std::memory_order_release);
  }
  cv_.notify_all();
  wake();
}

void ControlPlane::handle(int peer, uint8_t type, int32_t culprit, int32_t reporter, uint64_t a, uint64_t b,
                          uint64_t c, std::string text) {
  switch (type) {
    case kQuery: {
      std::string sig;  // {seq, Signature} when the peer asked about a collective we remember
      if (b > 0) {
        std::lock_guard lock(history_mu_);
        const auto& h = history_[b % kSignatureHistory];
        if (h.first == b) {
          sig.assign(reinterpret_cast<const char*>(&h.first), sizeof h.first);
          sig.append(reinterpret_cast<const char*>(&h.second), sizeof h.second);
        }
      }
      send(peer, kStatus, -1, rank_, a, entered_.load(), completed_.load(), sig);
      return;
    }
    case kStatus: {
      std::lock_guard lock(mu_);
      if (a != query_id_) return;  // a late answer to an earlier question
      auto& st = peers_[peer].state;
      st.answered = true;
      st.entered = b;
      st.completed = c;
      st.has_signature = text.size() == sizeof(uint64_t) + sizeof(Signature);
      if (st.has_signature) std::memcpy(&st.signature, text.data() + sizeof(uint64_t), sizeof(Signature));
      break;
    }
    case kAbort: {
      std::lock_guard lock(mu_);
      if (!failure_) failure_ = Failure{culprit, reporter, a, std::move(text)};
      break;
    }
    case kBye: {
      std::lock_guard lock(mu_);
      peers_[peer].state.said_bye = true;
      peers_[peer].state.completed = a;
      break;
    }
    default:
      log::get("coll")->warn("ring control: unknown message type {} from rank {}", type, peer);
      return;
  }
  cv_.notify_all();
  wake();
}

// One thread around poll(2): reads every peer's messages, answers queries, records notices and
// closed connections. Never throws (a system-call failure here ends the thread with a log line:
// the collectives then fall back on their own timeouts).
void ControlPlane::loop() {
  try {
    std::vector<pollfd> fds;
    std::vector<int> who;
    char buf[4096];
    while (true) {
      fds.assign(1, pollfd{stop_fd_, POLLIN, 0});
      who.assign(1, -1);
      {
        std::lock_guard lock(mu_);
        for (int p = 0; p < size_; ++p)
          if (!peers_[p].state.closed) {
            fds.push_back(pollfd{peers_[p].sock.fd(), POLLIN, 0});
            who.push_back(p);
          }
      }
      int rc = ::poll(fds.data(), fds.size(), -1);
      if (rc < 0 && errno == EINTR) continue;
      CHECK_SYS(rc);
      if (fds[0].revents) return;
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        const int peer = who[i];
        Peer& p = peers_[peer];
        bool closed = false;
        while (true) {
          ssize_t k = ::recv(p.sock.fd(), buf, sizeof buf, MSG_DONTWAIT);
          if (k > 0) {
            p.inbox.append(buf, static_cast<size_t>(k));
            continue;
          }
          if (k < 0 && errno == EINTR) continue;
          if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          closed = true;  // EOF, reset or any other error: the connection is gone
          break;
        }
        while (p.inbox.size() >= sizeof(Msg)) {
          Msg m;
          std::memcpy(&m, p.inbox.data(), sizeof m);
          if (m.magic != kMagic || m.text_len > kMaxText) {
            log::get("coll")->warn("ring control: garbage from rank {}; dropping its connection", peer);
            closed = true;
            break;
          }
          if (p.inbox.size() < sizeof m + m.text_len) break;
          std::string text = p.inbox.substr(sizeof m, m.text_len);
          p.inbox.erase(0, sizeof m + m.text_len);
          handle(peer, m.type, m.culprit, m.reporter, m.a, m.b, m.c, std::move(text));
        }
        if (closed) on_closed(peer);
      }
    }
  } catch (const std::exception& e) {
    log::get("coll")->error("ring control thread stopped: {}", e.what());
  }
}

}  // namespace dp::ring
