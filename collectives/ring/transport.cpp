#include "collectives/ring/transport.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/hash.h"
#include "collectives/bootstrap/common.h"
#include "collectives/communicator.h"

namespace dp::ring {
namespace {

constexpr uint32_t kMagic = 0x54445044;  // "DPDT"
constexpr size_t kHeaderBytes = 40;
constexpr int kMaxIov = 64;

struct DataHeader {
  uint32_t magic;
  uint8_t kind, dtype, op, algo;
  uint64_t seq;
  int64_t count;
  int32_t root;
  uint32_t step;
  uint64_t history;  // the desync hash
};
static_assert(sizeof(DataHeader) == kHeaderBytes);
static_assert(sizeof(RecvStream::header) == kHeaderBytes);

// After a data connection breaks, how long to wait for the control plane to learn why (the
// peer's abort notice, or its control connection closing too) before blaming the peer itself.
constexpr double kVerdictWaitS = 2.0;

// Mismatch probes (probe_mismatch): the first after a collective has not moved for
// kFirstProbeS (or a quarter of the timeout if that is shorter), then after stalls twice as
// long each time, up to kMaxProbeIntervalS. A stall that short is common (a peer still
// computing), so a probe is one small control message per peer, answered by its control thread.
constexpr double kFirstProbeS = 0.1;
constexpr double kMaxProbeIntervalS = 2.0;
constexpr double kProbeAnswerWaitS = 0.2;

// How far back history_differs looks for the collective where two ranks' histories part (the
// control plane remembers the last 16 signatures).
constexpr uint64_t kSignatureLookback = 16;

// The start of a shared-memory spin that pauses without yielding the core.
constexpr auto kPauseOnly = std::chrono::microseconds(2);

const char* const kSameEverywhere =
    "collectives must be issued in the same order, with the same dtype, size, op and root, on every rank";

std::string describe_header(const DataHeader& h) {
  return fmt::format("{} #{} ({}, {} elements, algorithm {}, step {})", kind_name(static_cast<Kind>(h.kind)), h.seq,
                     dtype_name(static_cast<DType>(h.dtype)), h.count, algo_name(static_cast<Algo>(h.algo)), h.step);
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Allreduce: return "allreduce";
    case Kind::Broadcast: return "broadcast";
    case Kind::Allgather: return "allgather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Barrier: return "barrier";
  }
  return "?";
}

const char* algo_name(Algo a) {
  switch (a) {
    case Algo::Local: return "local";
    case Algo::Ring: return "ring";
    case Algo::RecursiveDoubling: return "recursive-doubling";
    case Algo::BinomialTree: return "binomial-tree";
    case Algo::Chain: return "chain";
    case Algo::Dissemination: return "dissemination";
    case Algo::Hierarchical: return "hierarchical";
  }
  return "?";
}

std::string CollectiveInfo::description() const {
  if (kind == Kind::Barrier) return fmt::format("ring barrier #{}", seq);
  return collective_description("ring", kind_name(kind), seq, dtype, count,
                                op > 0 ? reduce_op_name(static_cast<ReduceOp>(op - 1)) : nullptr, root);
}

Signature signature_of(const CollectiveInfo& info) {
  Signature s;
  s.kind = static_cast<uint8_t>(info.kind);
  s.dtype = static_cast<uint8_t>(info.dtype);
  s.op = info.op;
  s.algo = static_cast<uint8_t>(info.algo);
  s.root = info.root;
  s.count = info.count;
  s.bucket = info.bucket;
  return s;
}

uint64_t desync_hash(uint64_t previous, const CollectiveInfo& info) {
  // splitmix64 (base/hash.h) over each field: any single difference changes every later value.
  auto mix = [](uint64_t h, uint64_t v) { return splitmix64(h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2))); };
  uint64_t h = mix(previous, static_cast<uint64_t>(info.kind) << 8 | info.op);
  h = mix(h, static_cast<uint64_t>(info.dtype));
  h = mix(h, static_cast<uint64_t>(info.count));
  return mix(h, static_cast<uint64_t>(static_cast<int64_t>(info.bucket)));
}

std::string describe_signature(const Signature& sig, bool with_algo) {
  const auto kind = static_cast<Kind>(sig.kind);
  if (kind == Kind::Barrier) return with_algo ? fmt::format("barrier (algorithm {})", algo_name(static_cast<Algo>(sig.algo))) : "barrier";
  std::string d = fmt::format("{} ({}, {} element{}", kind_name(kind), dtype_name(static_cast<DType>(sig.dtype)),
                              sig.count, sig.count == 1 ? "" : "s");
  if (sig.op > 0 && sig.op <= 4) d += fmt::format(", {}", reduce_op_name(static_cast<ReduceOp>(sig.op - 1)));
  if (sig.root >= 0) d += fmt::format(", root {}", sig.root);
  if (sig.bucket >= 0) d += fmt::format(", bucket {}", sig.bucket);
  if (with_algo) d += fmt::format(", algorithm {}", algo_name(static_cast<Algo>(sig.algo)));
  return d + ")";
}

std::string mismatch_reason(uint64_t seq, std::vector<std::pair<int, Signature>> issued) {
  std::sort(issued.begin(), issued.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // Groups of ranks with the same signature, in the order of their lowest rank.
  std::vector<std::pair<Signature, std::vector<int>>> groups;
  for (const auto& [rank, sig_] : issued) {
    const Signature& sig = sig_;  // a lambda may not capture a structured binding before C++20 in clang 14
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == sig; });
    if (it == groups.end()) groups.push_back({sig, {rank}});
    else it->second.push_back(rank);
  }
  if (groups.size() < 2) return "";
  std::vector<std::string> differs;
  auto note = [&](bool d, const char* what) {
    if (d && std::find(differs.begin(), differs.end(), what) == differs.end()) differs.push_back(what);
  };
  const Signature& a = groups[0].first;
  for (size_t g = 1; g < groups.size(); ++g) {
    const Signature& b = groups[g].first;
    note(a.kind != b.kind, "the collective");
    note(a.dtype != b.dtype, "the dtype");
    if (a.kind != b.kind) continue;  // the other arguments mean different things
    note(a.count != b.count, "the element count");
    note(a.op != b.op, "the reduction");
    note(a.root != b.root, "the root");
    note(a.bucket != b.bucket, "the gradient bucket");
  }
  const bool algo_only = differs.empty();  // same arguments, another algorithm: the settings differ
  if (algo_only) differs.push_back("the algorithm (DPTRAIN_RING_SMALL_BYTES differs between ranks)");
  auto ranks = [](const std::vector<int>& rs) {
    std::string s = rs.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < rs.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", rs[i]);
    return s;
  };
  std::string msg = fmt::format("{} issued {} as #{}", ranks(groups[0].second),
                                describe_signature(groups[0].first, algo_only), seq);
  for (size_t g = 1; g < groups.size(); ++g)
    msg += fmt::format("{} {} issued {}", g + 1 == groups.size() ? " while" : ",", ranks(groups[g].second),
                       describe_signature(groups[g].first, algo_only));
  std::string what;
  for (size_t i = 0; i < differs.size(); ++i)
    what += (i == 0 ? "" : i + 1 == differs.size() ? " and " : ", ") + differs[i];
  return fmt::format("{}: {} differ{}; {}", msg, what, differs.size() == 1 ? "s" : "", kSameEverywhere);
}

bool SendStream::complete() const { return header_done == kHeaderBytes && cur == regions.size(); }
bool RecvStream::complete() const { return header_done == kHeaderBytes && cur == regions.size(); }

Transport::Transport(int rank, int size, std::vector<Socket> data, ShmLinks shm, ControlPlane& control,
                     double timeout_s, double spin_us, bool pause_before_yield)
    : rank_(rank),
      size_(size),
      data_(std::move(data)),
      shm_(std::move(shm)),
      control_(control),
      timeout_s_(timeout_s),
      spin_us_(spin_us),
      pause_before_yield_(pause_before_yield) {
  if (shm_.use.empty()) shm_.use.assign(size_, false);
  kick_closed_.assign(size_, false);
  heard_.reset(new std::atomic<uint8_t>[static_cast<size_t>(size_)]);
  awaited_.reset(new std::atomic<uint8_t>[static_cast<size_t>(size_)]);
  for (int p = 0; p < size_; ++p) heard_[p].store(0), awaited_[p].store(0);
}

std::string Transport::name_ranks(const std::vector<int>& ranks) const {
  return topo_ ? topo_->name(ranks) : rank_list(ranks);
}

Transport::~Transport() = default;

char* Transport::scratch(int slot, size_t bytes) {
  Scratch& s = scratch_[slot];
  if (s.bytes < bytes) {
    s.mem.reset(new char[bytes]);  // uninitialised on purpose: every byte is received before use
    s.bytes = bytes;
  }
  return s.mem.get();
}

void Transport::begin(CollectiveInfo info) {
  info_ = std::move(info);
  for (int p = 0; p < size_; ++p) {
    heard_[p].store(0, std::memory_order_relaxed);
    awaited_[p].store(0, std::memory_order_relaxed);
  }
  next_probe_ = Clock::now();
  probe_interval_s_ = std::min(kFirstProbeS, timeout_s_ / 4);
  // Only when something happened since the last look (every control event bumps the counter),
  // or a peer has left (its BYE stays relevant for every later collective): the full check
  // takes size() locks, a noticeable part of a small collective.
  const uint64_t events = control_.events();
  if (events != control_events_seen_ || bye_seen_) {
    control_events_seen_ = events;
    check_control();
  }
}

void Transport::check_signatures(const std::vector<PeerStatus>& st) {
  const Signature mine = signature_of(info_);
  std::vector<std::pair<int, Signature>> issued = {{rank_, mine}};
  int culprit = -1;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || !st[p].answered || !st[p].has_signature) continue;
    issued.push_back({p, st[p].signature});
    if (culprit < 0 && !(st[p].signature == mine)) culprit = p;
  }
  if (culprit >= 0) fail(culprit, mismatch_reason(info_.seq, std::move(issued)));
}

void Transport::probe_mismatch() {
  const std::vector<PeerStatus> st = control_.query_status(std::min(kProbeAnswerWaitS, timeout_s_ / 4), info_.seq);
  if (auto f = control_.failure()) raise(*f);
  check_signatures(st);
  next_probe_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(probe_interval_s_));
  probe_interval_s_ = std::min(probe_interval_s_ * 2, kMaxProbeIntervalS);
}

void Transport::raise(const Failure& f) const {
  std::string msg = fmt::format("{} [{}]: {}", info_.description(), identity_string(), f.reason);
  if (f.reporter >= 0 && f.reporter != rank_) msg += fmt::format(" (reported by rank {}", f.reporter);
  if (f.reporter >= 0 && f.reporter != rank_ && f.seq != 0 && f.seq != info_.seq)
    msg += fmt::format(" in #{}", f.seq);
  if (f.reporter >= 0 && f.reporter != rank_) msg += ")";
  throw CommunicationError(msg);
}

void Transport::fail(int culprit, const std::string& reason) {
  raise(control_.fail(Failure{culprit, rank_, info_.seq, reason}));
}

// Failures recorded by the control plane (a peer's notice, our own abort()), and peers that
// left cleanly before this collective and so will never take part in it.
void Transport::check_control() {
  if (auto f = control_.failure()) raise(*f);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    PeerStatus st = control_.peer_state(p);
    bye_seen_ |= st.said_bye;
    if (st.said_bye && st.completed < info_.seq)
      fail(p, fmt::format("rank {} shut down its communicator after #{}, before this collective (collectives must "
                          "be issued in the same order on every rank)",
                          p, st.completed));
  }
}

void Transport::peer_lost(int peer, int err) {
  control_.await_peer_verdict(peer, kVerdictWaitS);
  if (auto f = control_.failure()) raise(*f);
  PeerStatus st = control_.peer_state(peer);
  if (st.said_bye)
    fail(peer, fmt::format("rank {} shut down its communicator after #{}, in the middle of this collective", peer,
                           st.completed));
  if (err != 0 && err != ECONNRESET && err != EPIPE)
    fail(peer, fmt::format("socket error with {}: {} (errno {})", name_ranks({peer}), std::strerror(err), err));
  fail(peer, fmt::format("{} closed the connection (its process died or exited)", name_ranks({peer})));
}

void Transport::make_header(uint32_t step, char out[40]) const {
  DataHeader h{kMagic,
               static_cast<uint8_t>(info_.kind),
               static_cast<uint8_t>(info_.dtype),
               info_.op,
               static_cast<uint8_t>(info_.algo),
               info_.seq,
               info_.count,
               info_.root,
               step,
               info_.history};
  std::memcpy(out, &h, sizeof h);
}

void Transport::check_header(const RecvStream& r, uint32_t step) {
  DataHeader got;
  std::memcpy(&got, r.header, sizeof got);
  char want_bytes[kHeaderBytes];
  make_header(step, want_bytes);
  if (std::memcmp(&got, want_bytes, kHeaderBytes) == 0) {
    heard_[r.peer].store(1, std::memory_order_relaxed);
    return;
  }
  DataHeader want;
  std::memcpy(&want, want_bytes, sizeof want);
  if (got.magic == kMagic && got.history != want.history) {
    DataHeader same = got;
    same.history = want.history;
    if (std::memcmp(&same, &want, kHeaderBytes) == 0) history_differs(r.peer);
  }
  if (got.magic != kMagic)
    fail(r.peer, fmt::format("rank {} sent bytes that are not a ring stream header (a protocol bug, or mixed "
                             "builds)",
                             r.peer));
  // A stream of an earlier collective that this rank completed without reading it: the ranks
  // issued that one differently (a broadcast whose ranks disagree on the root completes on
  // every rank that believes it is the root). Name that collective, not this one.
  if (got.seq < want.seq) {
    Signature theirs;
    theirs.kind = got.kind, theirs.dtype = got.dtype, theirs.op = got.op, theirs.algo = got.algo;
    theirs.root = got.root, theirs.count = got.count;
    if (auto mine = control_.issued(got.seq); mine && (theirs.bucket = mine->bucket, !(*mine == theirs)))
      fail(r.peer, mismatch_reason(got.seq, {{rank_, *mine}, {r.peer, theirs}}));
  }
  // A stream of a later collective: the peer finished this one without sending us what we
  // wait for, because it issued this one differently. Ask it (and the others) what.
  if (got.seq > want.seq) {
    const std::vector<PeerStatus> st =
        control_.query_status(std::min(kProbeAnswerWaitS, timeout_s_ / 4), info_.seq);
    if (auto f = control_.failure()) raise(*f);
    check_signatures(st);
  }
  // Worded the same for every rank that reads it (the notice carries it to the peers).
  fail(r.peer, fmt::format("rank {} is in {} while rank {} expects {}: {}", r.peer, describe_header(got), rank_,
                           describe_header(want), kSameEverywhere));
}

// Only the desync hashes differ: the two ranks issued this collective with the same op, dtype
// and count, but not the same history. Either this one reduces another gradient bucket (the
// peers' signatures say so), or an earlier collective differed: the most recent 16 are asked
// about, the earliest that differs is named.
void Transport::history_differs(int peer) {
  const double wait = std::min(kProbeAnswerWaitS, timeout_s_ / 4);
  check_signatures(control_.query_status(wait, info_.seq));
  if (auto f = control_.failure()) raise(*f);
  uint64_t earliest = 0;
  Signature mine_then, theirs_then;
  for (uint64_t seq = info_.seq - 1; seq >= 1 && seq + kSignatureLookback > info_.seq; --seq) {
    const auto mine = control_.issued(seq);
    if (!mine) break;
    const PeerStatus st = control_.query_status(wait, seq)[peer];
    if (auto f = control_.failure()) raise(*f);
    if (!st.answered || !st.has_signature) break;
    if (!(st.signature == *mine)) earliest = seq, mine_then = *mine, theirs_then = st.signature;
  }
  if (earliest > 0)
    fail(peer, fmt::format("{} (found by the desync check in #{})",
                           mismatch_reason(earliest, {{rank_, mine_then}, {peer, theirs_then}}), info_.seq));
  fail(peer, fmt::format("rank {} and rank {} issued different collectives before #{} (the desync check's hash of "
                         "(op, dtype, count, bucket) differs; the collective where they part is older than the last "
                         "{} remembered): {}",
                         rank_, peer, info_.seq, kSignatureLookback, kSameEverywhere));
}

// Accounts `bytes` sent: header first, then regions (skipping empty ones that are ready).
void Transport::advance_send(SendStream& s, size_t bytes) {
  size_t h = std::min(bytes, kHeaderBytes - s.header_done);
  s.header_done += h;
  bytes -= h;
  while (bytes > 0) {
    size_t take = std::min(bytes, s.regions[s.cur].len - s.off);
    s.off += take;
    bytes -= take;
    if (s.off == s.regions[s.cur].len) {
      ++s.cur;
      s.off = 0;
    }
  }
  if (s.header_done == kHeaderBytes)
    while (s.cur < std::min(s.ready, s.regions.size()) && s.off == s.regions[s.cur].len) {
      ++s.cur;  // zero-length regions
      s.off = 0;
    }
}

bool Transport::try_send(SendStream& s, uint32_t step) {
  bool moved = false;
  char header[kHeaderBytes];
  make_header(step, header);
  advance_send(s, 0);
  while (!s.complete()) {
    iovec iov[kMaxIov];
    int n = 0;
    if (s.header_done < kHeaderBytes) iov[n++] = {header + s.header_done, kHeaderBytes - s.header_done};
    for (size_t i = s.cur, off = s.off; i < std::min(s.ready, s.regions.size()) && n < kMaxIov; ++i, off = 0)
      if (s.regions[i].len > off) iov[n++] = {s.regions[i].ptr + off, s.regions[i].len - off};
    if (n == 0) break;  // waiting for regions to become ready
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<size_t>(n);
    ssize_t k = ::sendmsg(data_[s.peer].fd(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      peer_lost(s.peer, errno);
    }
    moved = true;
    advance_send(s, static_cast<size_t>(k));
  }
  return moved;
}

bool Transport::try_send_shm(SendStream& s, uint32_t step) {
  ShmFifo& fifo = shm_.out[s.peer];
  bool moved = false;
  char header[kHeaderBytes];
  make_header(step, header);
  advance_send(s, 0);
  while (!s.complete()) {
    size_t w = 0;
    if (s.header_done < kHeaderBytes) w = fifo.write(header + s.header_done, kHeaderBytes - s.header_done);
    else if (s.cur < s.ready) w = fifo.write(s.regions[s.cur].ptr + s.off, s.regions[s.cur].len - s.off);
    if (w == 0) break;  // full, or waiting for regions to become ready
    moved = true;
    advance_send(s, w);
  }
  if (moved) shm_.bell[s.peer].ring();
  return moved;
}

// Receives into the header and the current region only (never beyond: the next region may be
// the same scratch piece, still to be reduced). Returns after completing one region so that the
// caller can forward it before receiving more.
bool Transport::try_recv(RecvStream& r, uint32_t step) {
  bool moved = false;
  while (!r.complete()) {
    if (r.header_done == kHeaderBytes) {
      Region& reg = r.regions[r.cur];
      if (r.off == reg.len) {  // region complete (or empty)
        if (r.on_region) r.on_region(r.cur);
        ++r.cur;
        r.off = 0;
        moved = true;
        return moved;
      }
    }
    iovec iov[2];
    int n = 0;
    if (r.header_done < kHeaderBytes) iov[n++] = {r.header + r.header_done, kHeaderBytes - r.header_done};
    if (r.cur < r.regions.size() && r.regions[r.cur].len > r.off)
      iov[n++] = {r.regions[r.cur].ptr + r.off, r.regions[r.cur].len - r.off};
    ssize_t k = ::readv(data_[r.peer].fd(), iov, n);
    if (k == 0) peer_lost(r.peer, 0);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
      peer_lost(r.peer, errno);
    }
    moved = true;
    size_t left = static_cast<size_t>(k);
    if (r.header_done < kHeaderBytes) {
      size_t h = std::min(left, kHeaderBytes - r.header_done);
      r.header_done += h;
      left -= h;
      if (r.header_done == kHeaderBytes) check_header(r, step);
    }
    r.off += left;
  }
  return moved;
}

bool Transport::try_recv_shm(RecvStream& r, uint32_t step) {
  ShmFifo& fifo = shm_.in[r.peer];
  bool moved = false, freed = false;
  while (!r.complete()) {
    if (r.header_done == kHeaderBytes && r.off == r.regions[r.cur].len) {  // region complete (or empty)
      if (r.on_region) r.on_region(r.cur);
      ++r.cur;
      r.off = 0;
      moved = true;
      break;  // let the caller forward it
    }
    size_t k = 0;
    if (r.header_done < kHeaderBytes) {
      k = fifo.read(r.header + r.header_done, kHeaderBytes - r.header_done);
      r.header_done += k;
      if (k > 0 && r.header_done == kHeaderBytes) check_header(r, step);
    } else if (!r.consume) {
      k = fifo.read(r.regions[r.cur].ptr + r.off, r.regions[r.cur].len - r.off);
      r.off += k;
    } else {
      size_t avail = 0;
      const char* data = fifo.peek(&avail);
      const size_t want = std::min(avail, r.regions[r.cur].len - r.off);
      if (r.carry_len > 0 || (want > 0 && want < r.unit)) {  // put one split element together
        k = std::min(want, r.unit - r.carry_len);
        std::memcpy(r.carry + r.carry_len, data, k);
        r.carry_len += k;
        if (r.carry_len == r.unit) {
          r.consume(r.cur, r.off + k - r.unit, r.carry, r.unit);
          r.carry_len = 0;
        }
      } else {
        k = want - want % r.unit;
        if (k > 0) r.consume(r.cur, r.off, data, k);
      }
      fifo.release(k);
      r.off += k;
    }
    if (k == 0) break;
    moved = freed = true;
  }
  if (freed) shm_.bell[r.peer].ring();  // the writer may wait for room
  return moved;
}

void Transport::run(std::vector<SendStream>& sends, std::vector<RecvStream>& recvs, uint32_t step) {
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  const auto spin = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spin_us_ * 1e-6));
  auto last_progress = Clock::now();
  for (auto& r : recvs) awaited_[r.peer].store(1, std::memory_order_relaxed);
  while (true) {
    const uint32_t bell_seen = shm_.own_bell.valid() ? shm_.own_bell.seen() : 0;
    bool all = true, moved = false, tcp_pending = false;
    for (auto& s : sends) {
      if (!s.complete()) moved |= shm_.use[s.peer] ? try_send_shm(s, step) : try_send(s, step);
      all &= s.complete();
      tcp_pending |= !s.complete() && !shm_.use[s.peer];
    }
    for (auto& r : recvs) {
      if (!r.complete()) moved |= shm_.use[r.peer] ? try_recv_shm(r, step) : try_recv(r, step);
      all &= r.complete();
      tcp_pending |= !r.complete() && !shm_.use[r.peer];
    }
    if (all) {
      for (auto& r : recvs) awaited_[r.peer].store(0, std::memory_order_relaxed);
      return;
    }
    const auto now = Clock::now();
    if (moved) {
      last_progress = now;
      continue;
    }
    if (control_.events() != control_events_seen_) {
      control_events_seen_ = control_.events();
      check_control();
    }
    check_lost_shm_peers(sends, recvs);
    if (now >= last_progress + timeout) timed_out(sends, recvs);
    const auto probe_at = std::max(next_probe_, last_progress + std::chrono::duration_cast<Clock::duration>(
                                                                     std::chrono::duration<double>(probe_interval_s_)));
    if (now >= probe_at) {
      probe_mismatch();
      continue;
    }
    if (!tcp_pending && now < last_progress + spin) {
      // Yield while spinning: when the peer we wait for shares this core (more runnable threads
      // than cores, other jobs included), it runs now instead of after our time slice. The
      // first microseconds only pause: an answer is often that close, and a yield costs a
      // system call.
      if (pause_before_yield_ && now < last_progress + kPauseOnly) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      } else {
        sched_yield();
      }
      continue;
    }
    wait(sends, recvs, std::min(last_progress + timeout, probe_at), bell_seen);
  }
}

void Transport::wait(const std::vector<SendStream>& sends, const std::vector<RecvStream>& recvs,
                     Clock::time_point deadline, uint32_t bell_seen) {
  std::vector<pollfd> fds;
  std::vector<int> kick_peer;  // per fds entry: the shared-memory peer whose kicks it carries, or -1
  fds.push_back(pollfd{control_.wake_fd(), POLLIN, 0});
  kick_peer.push_back(-1);
  auto watch_kicks = [&](int peer) {
    if (kick_closed_[peer]) return;
    for (size_t i = 1; i < fds.size(); ++i)
      if (kick_peer[i] == peer) return;
    fds.push_back(pollfd{data_[peer].fd(), POLLIN, 0});
    kick_peer.push_back(peer);
  };
  bool shm_pending = false, tcp_pending = false;
  for (auto& s : sends) {
    if (s.complete()) continue;
    if (shm_.use[s.peer]) {
      shm_pending = true;
      watch_kicks(s.peer);
    } else if (s.header_done < kHeaderBytes || s.cur < s.ready) {
      tcp_pending = true;
      fds.push_back(pollfd{data_[s.peer].fd(), POLLOUT, 0});
      kick_peer.push_back(-1);
    }
  }
  for (auto& r : recvs) {
    if (r.complete()) continue;
    if (shm_.use[r.peer]) {
      shm_pending = true;
      watch_kicks(r.peer);
    } else {
      tcp_pending = true;
      fds.push_back(pollfd{data_[r.peer].fd(), POLLIN, 0});
      kick_peer.push_back(-1);
    }
  }
  if (shm_pending && !tcp_pending) {  // only shared memory: sleep on the doorbell
    shm_.own_bell.sleep(bell_seen, deadline);
    return;
  }
  if (shm_pending && !shm_.own_bell.begin_poll(bell_seen)) return;  // rung meanwhile
  int rc = ::poll(fds.data(), fds.size(), poll_ms_until(deadline));
  if (shm_pending) shm_.own_bell.end_poll();
  if (rc < 0 && errno != EINTR) CHECK_SYS(rc);
  if (rc <= 0) return;
  if (fds[0].revents) control_.drain_wake();
  for (size_t i = 1; i < fds.size(); ++i) {
    if (kick_peer[i] < 0 || !fds[i].revents) continue;
    char buf[256];
    ssize_t k;
    while ((k = ::recv(fds[i].fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
    }
    // EOF: the peer is gone, but what it wrote to the FIFO is still to be read; the control
    // plane decides (check_lost_shm_peers). Stop watching, or poll would spin on it.
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      kick_closed_[kick_peer[i]] = true;
  }
}

void Transport::check_lost_shm_peers(const std::vector<SendStream>& sends, const std::vector<RecvStream>& recvs) {
  for (auto& r : recvs)
    if (!r.complete() && shm_.use[r.peer] && control_.lost(r.peer) && shm_.in[r.peer].readable() == 0)
      peer_lost(r.peer, 0);
  for (auto& s : sends)
    if (!s.complete() && shm_.use[s.peer] && control_.lost(s.peer) && shm_.out[s.peer].writable() == 0)
      peer_lost(s.peer, 0);
}

void Transport::timed_out(const std::vector<SendStream>& sends, const std::vector<RecvStream>& recvs) {
  const std::string waited = fmt::format("{:g} s", timeout_s_);
  // The rank that has not entered this collective is the one to blame, not the neighbour that
  // is stuck waiting on it: ask everyone. Ranks that do not answer at all (stopped, hung, cut
  // off) come before one still in an earlier collective: that one answers, so it is alive and
  // most likely waiting on a silent one (a stopped ring neighbour holds its last piece). Every
  // rank of a kind is named, grouped by host, so that a host that went away is named as such.
  // Half the timeout (at most 2 s) for the answers: a loaded machine answers late, and the total
  // stays under twice the timeout.
  std::vector<PeerStatus> st = control_.query_status(std::clamp(timeout_s_ / 2, 0.05, 2.0), info_.seq);
  if (auto f = control_.failure()) raise(*f);
  check_signatures(st);
  std::vector<int> died, silent;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (st[p].closed && !st[p].said_bye) died.push_back(p);
    else if (!st[p].answered && !st[p].closed) silent.push_back(p);
  }
  // "...cut off": only a job on several hosts has links to cut.
  const char* cut = !(topo_ && topo_->several_hosts()) ? ""
                    : silent.size() == 1              ? ", or its host cut off"
                    : topo_->hosts_of(silent) == 1    ? ", or their host cut off"
                                                      : ", or their hosts cut off";
  if (!died.empty())
    fail(died[0], fmt::format("{} closed the connection ({} died or exited); no progress for {} (timeout)",
                              name_ranks(died), died.size() == 1 ? "its process" : "their processes", waited));
  if (!silent.empty())
    fail(silent[0], fmt::format("{} {} stopped or hung{}?); no progress for {} (timeout)", name_ranks(silent),
                                silent.size() == 1 ? "does not answer (is its process" : "do not answer (are their processes",
                                cut, waited));
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || !st[p].answered || st[p].entered >= info_.seq) continue;
    if (st[p].entered > st[p].completed)
      fail(p, fmt::format("{} is still in collective #{}, not in this one; no progress for {} (timeout)",
                          name_ranks({p}), st[p].entered, waited));
    fail(p, fmt::format("{} has not joined this collective (it last completed #{}); no progress for {} "
                        "(timeout)",
                        name_ranks({p}), st[p].completed, waited));
  }
  for (auto& r : recvs)
    if (!r.complete()) fail(r.peer, fmt::format("no data from {} for {} (timeout)", name_ranks({r.peer}), waited));
  for (auto& s : sends)
    if (!s.complete()) fail(s.peer, fmt::format("{} has not taken data for {} (timeout)", name_ranks({s.peer}), waited));
  fail(-1, fmt::format("no progress for {} (timeout)", waited));
}

// The streams live in members so that their vectors keep their memory from call to call: the
// small-message algorithms are made of these, and allocating showed in their profile.
void Transport::sendrecv(int to, const void* send_buf, size_t send_bytes, int from, void* recv_buf,
                         size_t recv_bytes, uint32_t step) {
  sr_sends_.resize(to >= 0 ? 1 : 0);
  sr_recvs_.resize(from >= 0 ? 1 : 0);
  if (to >= 0) {
    SendStream& s = sr_sends_[0];
    s.peer = to;
    s.regions.assign(1, Region{const_cast<char*>(static_cast<const char*>(send_buf)), send_bytes});
    s.ready = 1;
    s.header_done = s.cur = s.off = 0;
  }
  if (from >= 0) {
    RecvStream& r = sr_recvs_[0];
    r.peer = from;
    r.regions.assign(1, Region{static_cast<char*>(recv_buf), recv_bytes});
    r.on_region = nullptr;
    r.consume = nullptr;
    r.unit = 1;
    r.header_done = r.cur = r.off = r.carry_len = 0;
  }
  run(sr_sends_, sr_recvs_, step);
}

}  // namespace dp::ring
