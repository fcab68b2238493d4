#include "collectives/ring/mesh.h"

#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <poll.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <random>

#include "base/error.h"
#include "collectives/bootstrap/job_token.h"
#include "collectives/listen_address.h"
#include "runtime/log.h"
#include "runtime/tunables.h"

namespace dp::ring {
namespace {

constexpr uint32_t kHelloMagic = 0x47525044;  // "DPRG"
constexpr uint32_t kVersion = 2;  // 2: the 80-byte hello with the token proof; 40-byte stream headers with the desync hash (transport.h)
enum : uint32_t { kData = 0, kControl = 1 };
constexpr uint8_t kAck = 0xA5;
constexpr size_t kMaxPending = 64;  // unproved connections held at once; the oldest goes first

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint32_t kind;
  int32_t rank;
  int32_t size;
  uint32_t pad;
  uint64_t nonce;                       // the listener's, from its published address
  uint8_t client_nonce[kNonceBytes];    // fresh per connection
  uint8_t mac[kMacBytes];               // HMAC(token, "ring-hello" | the 48 bytes above); zeros without a token
};
static_assert(sizeof(Hello) == 80);
constexpr size_t kSigned = offsetof(Hello, mac);

std::string hello_mac(const std::string& token, const Hello& h) {
  return token_proof(token, "ring-hello", std::string(reinterpret_cast<const char*>(&h), kSigned), "");
}
// The listener's answer: the ack byte, then its own proof (so a connector knows it reached a
// rank of its job, not whoever took the port).
std::string ack_proof(const std::string& token, const Hello& h) {
  if (token.empty()) return std::string(kMacBytes, '\0');
  return token_proof(token, "ring-ack", std::string(reinterpret_cast<const char*>(h.client_nonce), kNonceBytes),
                     std::string(reinterpret_cast<const char*>(&h.nonce), sizeof h.nonce));
}

// What each rank publishes: "host:port:nonce:node:shm" (host has no ':': IPv4 or a name; shm is
// the segment name, "-" when this rank has none).
struct Address {
  std::string host;
  int port = 0;
  uint64_t nonce = 0;
  int node = 0;
  std::string shm;
};

Address parse_address(const std::string& blob, int peer) {
  std::vector<std::string> f;
  size_t start = 0;
  for (size_t i = 0; i <= blob.size(); ++i)
    if (i == blob.size() || blob[i] == ':') {
      f.push_back(blob.substr(start, i - start));
      start = i + 1;
    }
  DP_CHECK(f.size() == 5, "ring: rank {} published a malformed address '{}' (mixed builds?)", peer, blob);
  Address addr;
  addr.host = f[0];
  addr.port = std::atoi(f[1].c_str());
  addr.nonce = std::strtoull(f[2].c_str(), nullptr, 16);
  addr.node = std::atoi(f[3].c_str());
  addr.shm = f[4] == "-" ? "" : f[4];
  return addr;
}

void tune(const Socket& s, uint32_t kind, int buffer_bytes) {
  s.set_nonblocking();
  s.set_nodelay();
  if (kind == kData && buffer_bytes > 0) s.set_buffer_sizes(buffer_bytes);
}

[[noreturn]] void setup_failed(const std::string& what, IoStatus st, int err) {
  const char* why = st == IoStatus::Timeout ? "timed out"
                    : st == IoStatus::Closed ? "the connection was closed"
                                             : std::strerror(err);
  throw DpError(fmt::format("ring setup [{}]: {}: {}", identity_string(), what, why));
}

// Maps the segments of the peers of this node and agrees, pair by pair over the data socket,
// which pairs use shared memory. See the header for the protocol.
void link_shared_memory(Mesh& m, const std::vector<std::string>& blobs, const SegmentLayout& layout,
                        Clock::time_point deadline) {
  std::vector<Address> addr;
  for (int p = 0; p < m.size; ++p) addr.push_back(parse_address(blobs[p], p));
  std::vector<int> node_ranks;  // slot i of every segment on this node belongs to node_ranks[i]
  for (int p = 0; p < m.size; ++p)
    if (addr[p].node == addr[m.rank].node) node_ranks.push_back(p);
  DP_CHECK(static_cast<int>(node_ranks.size()) == layout.local,
           "ring setup: {} ranks report node {} but the bootstrap says {} ranks per node", node_ranks.size(),
           addr[m.rank].node, layout.local);
  auto slot = [&](int p) { return static_cast<int>(std::find(node_ranks.begin(), node_ranks.end(), p) - node_ranks.begin()); };
  ShmLinks& l = m.shm;
  l.mapped.resize(m.size);
  l.use.assign(m.size, false);
  l.in.resize(m.size);
  l.out.resize(m.size);
  l.bell.resize(m.size);
  std::vector<uint8_t> mine(m.size, 0);
  for (int p : node_ranks) {
    if (p == m.rank || addr[p].shm.empty()) continue;
    try {
      l.mapped[p] = ShmSegment::open(addr[p].shm, layout.bytes());
      mine[p] = 1;
    } catch (const DpError& e) {
      log::get("coll")->warn("{}; rank {} and this rank talk over TCP", e.what(), p);
    }
  }
  // One byte each way per pair: all sends first (they fit in the socket buffer), then receives.
  for (int p : node_ranks) {
    if (p == m.rank || addr[p].shm.empty()) continue;
    int err = 0;
    IoStatus st = send_all(m.data[p], &mine[p], 1, deadline, &err);
    if (st != IoStatus::Ok) setup_failed(fmt::format("agreeing on shared memory with rank {}", p), st, err);
  }
  for (int p : node_ranks) {
    if (p == m.rank || addr[p].shm.empty()) continue;
    uint8_t theirs = 0;
    int err = 0;
    IoStatus st = recv_all(m.data[p], &theirs, 1, deadline, &err);
    if (st != IoStatus::Ok) setup_failed(fmt::format("agreeing on shared memory with rank {}", p), st, err);
    if (!(mine[p] && theirs)) continue;
    l.use[p] = true;
    ++l.local_peers;
    char* own = l.own.base();
    char* peer = l.mapped[p].base();
    l.in[p] = ShmFifo(reinterpret_cast<FifoControl*>(own + layout.control_offset(slot(p))),
                      own + layout.data_offset(slot(p)), layout.fifo_capacity);
    l.out[p] = ShmFifo(reinterpret_cast<FifoControl*>(peer + layout.control_offset(slot(m.rank))),
                       peer + layout.data_offset(slot(m.rank)), layout.fifo_capacity);
    l.bell[p] = Doorbell(reinterpret_cast<BellWord*>(peer + layout.bell_offset()), m.data[p].fd());
  }
  l.own_bell = Doorbell(reinterpret_cast<BellWord*>(l.own.base() + layout.bell_offset()));
  l.own.unlink();  // every peer that maps it has done so (its byte came after its open)
}


// One connection that has not yet sent a whole hello: it gets handshake_s to do so, and at most
// kMaxPending are held (the oldest is closed for a newcomer), so silent or half-open connections
// to a listener can neither stall the setup nor take this rank's descriptors.
struct Pending {
  Socket s;
  Hello h{};
  size_t got = 0;
  Clock::time_point until;
};

// A complete hello: a rank of this job (right nonce, right proof) is acked and takes its slot;
// anything else is dropped.
void take_hello(Mesh& m, Pending& p, uint64_t nonce, const std::string& token, int socket_buffer_bytes,
                Clock::time_point deadline, int& expected) {
  const Hello& h = p.h;
  if (h.magic != kHelloMagic || h.nonce != nonce ||
      (!token.empty() && !same_bytes(std::string(reinterpret_cast<const char*>(h.mac), kMacBytes), hello_mac(token, h)))) {
    log::get("coll")->warn("ring setup: dropped a connection that is not a rank of this job (wrong {})",
                           h.magic != kHelloMagic ? "greeting" : h.nonce != nonce ? "listener nonce" : "token proof");
    return;
  }
  DP_CHECK(h.version == kVersion, "ring setup: rank {} speaks protocol version {}, this rank {} (mixed builds?)", h.rank,
           h.version, kVersion);
  DP_CHECK(h.size == m.size, "ring setup: rank {} thinks the world has {} ranks, this rank {}", h.rank, h.size, m.size);
  DP_CHECK(h.rank > m.rank && h.rank < m.size && h.kind <= kControl, "ring setup: unexpected hello from rank {}",
           h.rank);
  Socket& slot = (h.kind == kData ? m.data : m.control)[h.rank];
  DP_CHECK(!slot, "ring setup: two {} connections claim rank {}", h.kind == kData ? "data" : "control", h.rank);
  tune(p.s, h.kind, socket_buffer_bytes);
  std::string ack(1, static_cast<char>(kAck));
  ack += ack_proof(token, h);
  int err = 0;
  IoStatus st = send_all(p.s, ack.data(), ack.size(), deadline, &err);
  if (st != IoStatus::Ok) setup_failed(fmt::format("acknowledging rank {}", h.rank), st, err);
  slot = std::move(p.s);
  --expected;
}

// Reads what `p` has sent so far; false when it is done with (complete, closed or failed).
bool read_hello(Pending& p) {
  while (p.got < sizeof p.h) {
    ssize_t k = ::recv(p.s.fd(), reinterpret_cast<char*>(&p.h) + p.got, sizeof p.h - p.got, MSG_DONTWAIT);
    if (k > 0) {
      p.got += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    return k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return false;
}

void accept_peers(Mesh& m, const Socket& listener, uint64_t nonce, const std::string& token, int socket_buffer_bytes,
                  Clock::time_point deadline, double timeout_s) {
  int expected = 2 * (m.size - 1 - m.rank);
  const auto handshake = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(tunables().number(Tunable::StoreHandshakeS)));
  std::vector<Pending> pending;
  std::vector<pollfd> pfds;
  while (expected > 0) {
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string missing;
      for (int peer = m.rank + 1; peer < m.size; ++peer)
        if (!m.data[peer] || !m.control[peer]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", peer);
      throw DpError(fmt::format("ring setup [{}]: timed out after {} s waiting for rank(s) {} to connect",
                                identity_string(), timeout_s, missing));
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(), [&](const Pending& p) { return p.until <= now; }),
                  pending.end());
    auto wake = deadline;
    pfds.assign(1, pollfd{listener.fd(), POLLIN, 0});
    for (const auto& p : pending) {
      pfds.push_back({p.s.fd(), POLLIN, 0});
      wake = std::min(wake, p.until);
    }
    if (::poll(pfds.data(), pfds.size(), poll_ms_until(wake)) < 0 && errno != EINTR) CHECK_SYS(-1);
    for (size_t i = pending.size(); i-- > 0;) {
      if (!pfds[i + 1].revents) continue;
      Pending& p = pending[i];
      if (read_hello(p)) continue;
      if (p.got == sizeof p.h) take_hello(m, p, nonce, token, socket_buffer_bytes, deadline, expected);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (pfds[0].revents & POLLIN) {
      int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0 && (errno == EMFILE || errno == ENFILE) && !pending.empty()) pending.erase(pending.begin());
      if (fd < 0) continue;
      if (pending.size() >= kMaxPending) pending.erase(pending.begin());
      pending.push_back(Pending{Socket(fd), {}, 0, Clock::now() + handshake});
    }
  }
}

}  // namespace

std::string ring_listen_host(const Bootstrap& bs, const std::string& iface) {
  return listen_address(Listener::Ring, {tunables().text(Tunable::RingHost), iface, "", bs.local_size() == bs.size()});
}

Mesh connect_mesh(Bootstrap& bs, const std::string& listen_host, int socket_buffer_bytes, size_t shm_fifo_bytes,
                  double timeout_s) {
  Mesh m;
  m.rank = bs.rank();
  m.size = bs.size();
  m.data.resize(m.size);
  m.control.resize(m.size);
  if (m.size == 1) return m;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));

  // 1. listen and publish
  int port = 0;
  Socket listener = listen_tcp(listen_host, 2 * m.size + 16, &port);
  std::random_device rd;
  const uint64_t nonce = (static_cast<uint64_t>(rd()) << 32 | rd()) ^ static_cast<uint64_t>(getpid());
  const SegmentLayout layout{shm_fifo_bytes, bs.local_size()};
  std::string shm_name = "-";
  if (shm_fifo_bytes > 0 && bs.local_size() > 1) {
    std::string name = fmt::format("/dptrain-ring-{}-{:x}", getpid(), nonce);
    try {
      m.shm.own = ShmSegment::create(name, layout.bytes());
      shm_name = name;
    } catch (const DpError& e) {
      log::get("coll")->warn("{}; the ranks of this node talk over TCP", e.what());
    }
  }
  std::vector<std::string> blobs =
      bs.allgather(fmt::format("{}:{}:{:x}:{}:{}", listen_host, port, nonce, bs.node_id(), shm_name));
  DP_CHECK(static_cast<int>(blobs.size()) == m.size, "ring: the bootstrap returned {} addresses for {} ranks",
           blobs.size(), m.size);

  // 2. connect to every lower rank (data and control) and say hello
  const std::string& token = bs.job_token();
  std::vector<Hello> sent(static_cast<size_t>(2 * m.rank));
  for (int peer = 0; peer < m.rank; ++peer) {
    Address a = parse_address(blobs[peer], peer);
    for (uint32_t kind : {kData, kControl}) {
      std::string what = fmt::format("rank {} at {}:{}", peer, a.host, a.port);
      Socket s = connect_tcp(a.host, a.port, deadline, what);
      tune(s, kind, socket_buffer_bytes);
      Hello& h = sent[static_cast<size_t>(2 * peer + kind)];
      h = Hello{kHelloMagic, kVersion, kind, m.rank, m.size, 0, a.nonce, {}, {}};
      const std::string cn = random_bytes(kNonceBytes);
      std::memcpy(h.client_nonce, cn.data(), kNonceBytes);
      if (!token.empty()) std::memcpy(h.mac, hello_mac(token, h).data(), kMacBytes);
      int err = 0;
      IoStatus st = send_all(s, &h, sizeof h, deadline, &err);
      if (st != IoStatus::Ok) setup_failed("sending the hello to " + what, st, err);
      (kind == kData ? m.data : m.control)[peer] = std::move(s);
    }
  }

  // 3. accept from every higher rank
  accept_peers(m, listener, nonce, token, socket_buffer_bytes, deadline, timeout_s);

  // 4. the lower ranks' acks and proofs
  for (int peer = 0; peer < m.rank; ++peer) {
    for (uint32_t kind : {kData, kControl}) {
      Socket& s = (kind == kData ? m.data : m.control)[peer];
      char ack[1 + kMacBytes] = {0};
      int err = 0;
      IoStatus st = recv_all(s, ack, sizeof ack, deadline, &err);
      if (st != IoStatus::Ok) setup_failed(fmt::format("waiting for rank {} to accept", peer), st, err);
      DP_CHECK(static_cast<uint8_t>(ack[0]) == kAck, "ring setup: rank {} answered {:#x} instead of the ack", peer,
               static_cast<uint8_t>(ack[0]));
      if (!token.empty() &&
          !same_bytes(std::string(ack + 1, kMacBytes), ack_proof(token, sent[static_cast<size_t>(2 * peer + kind)])))
        throw DpError(fmt::format("ring setup [{}]: the listener of rank {} could not prove the job token (another "
                                  "process took its address?)",
                                  identity_string(), peer));
    }
  }
  if (m.shm.own) link_shared_memory(m, blobs, layout, deadline);
  return m;
}

}  // namespace dp::ring
