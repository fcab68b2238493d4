#include "collectives/ring/mesh.h"

#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "runtime/error.h"

namespace dp::ring {
namespace {

constexpr uint32_t kHelloMagic = 0x47525044;  // "DPRG"
constexpr uint32_t kVersion = 1;
enum : uint32_t { kData = 0, kControl = 1 };
constexpr uint8_t kAck = 0xA5;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint32_t kind;
  int32_t rank;
  int32_t size;
  uint32_t pad;
  uint64_t nonce;
};
static_assert(sizeof(Hello) == 32);

struct Address {
  std::string host;
  int port = 0;
  uint64_t nonce = 0;
};

Address parse_address(const std::string& blob, int peer) {
  // "host:port:nonce" (host has no ':' since it is IPv4 or a name)
  auto a = blob.find(':');
  auto b = blob.find(':', a == std::string::npos ? a : a + 1);
  DP_CHECK(a != std::string::npos && b != std::string::npos, "ring: rank {} published a malformed address '{}'",
           peer, blob);
  Address addr;
  addr.host = blob.substr(0, a);
  addr.port = std::atoi(blob.substr(a + 1, b - a - 1).c_str());
  addr.nonce = std::strtoull(blob.substr(b + 1).c_str(), nullptr, 16);
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

}  // namespace

std::string ring_listen_host(const Bootstrap& bs) {
  if (const char* h = std::getenv("DPTRAIN_RING_HOST"); h && *h) return h;
  if (bs.local_size() == bs.size()) return "127.0.0.1";
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &res) != 0 || !res) return name;
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
  freeaddrinfo(res);
  return buf;
}

Mesh connect_mesh(Bootstrap& bs, const std::string& listen_host, int socket_buffer_bytes, double timeout_s) {
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
  const uint64_t nonce = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(getpid());
  std::vector<std::string> blobs = bs.allgather(fmt::format("{}:{}:{:x}", listen_host, port, nonce));
  DP_CHECK(static_cast<int>(blobs.size()) == m.size, "ring: the bootstrap returned {} addresses for {} ranks",
           blobs.size(), m.size);

  // 2. connect to every lower rank (data and control) and say hello
  for (int peer = 0; peer < m.rank; ++peer) {
    Address a = parse_address(blobs[peer], peer);
    for (uint32_t kind : {kData, kControl}) {
      std::string what = fmt::format("rank {} at {}:{}", peer, a.host, a.port);
      Socket s = connect_tcp(a.host, a.port, deadline, what);
      tune(s, kind, socket_buffer_bytes);
      Hello h{kHelloMagic, kVersion, kind, m.rank, m.size, 0, a.nonce};
      int err = 0;
      IoStatus st = send_all(s, &h, sizeof h, deadline, &err);
      if (st != IoStatus::Ok) setup_failed("sending the hello to " + what, st, err);
      (kind == kData ? m.data : m.control)[peer] = std::move(s);
    }
  }

  // 3. accept from every higher rank
  int expected = 2 * (m.size - 1 - m.rank);
  while (expected > 0) {
    Socket s = accept_tcp(listener, deadline);
    if (!s) {
      std::string missing;
      for (int peer = m.rank + 1; peer < m.size; ++peer)
        if (!m.data[peer] || !m.control[peer]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", peer);
      throw DpError(fmt::format("ring setup [{}]: timed out after {} s waiting for rank(s) {} to connect",
                                identity_string(), timeout_s, missing));
    }
    Hello h{};
    int err = 0;
    IoStatus st = recv_all(s, &h, sizeof h, deadline, &err);
    if (st != IoStatus::Ok || h.magic != kHelloMagic || h.nonce != nonce) continue;  // a stray connection
    DP_CHECK(h.version == kVersion, "ring setup: rank {} speaks protocol version {}, this rank {} (mixed builds?)",
             h.rank, h.version, kVersion);
    DP_CHECK(h.size == m.size, "ring setup: rank {} thinks the world has {} ranks, this rank {}", h.rank, h.size,
             m.size);
    DP_CHECK(h.rank > m.rank && h.rank < m.size && h.kind <= kControl, "ring setup: unexpected hello from rank {}",
             h.rank);
    Socket& slot = (h.kind == kData ? m.data : m.control)[h.rank];
    DP_CHECK(!slot, "ring setup: two {} connections claim rank {}", h.kind == kData ? "data" : "control", h.rank);
    tune(s, h.kind, socket_buffer_bytes);
    uint8_t ack = kAck;
    st = send_all(s, &ack, 1, deadline, &err);
    if (st != IoStatus::Ok) setup_failed(fmt::format("acknowledging rank {}", h.rank), st, err);
    slot = std::move(s);
    --expected;
  }

  // 4. the lower ranks' acks
  for (int peer = 0; peer < m.rank; ++peer) {
    for (Socket* s : {&m.data[peer], &m.control[peer]}) {
      uint8_t ack = 0;
      int err = 0;
      IoStatus st = recv_all(*s, &ack, 1, deadline, &err);
      if (st != IoStatus::Ok) setup_failed(fmt::format("waiting for rank {} to accept", peer), st, err);
      DP_CHECK(ack == kAck, "ring setup: rank {} answered {:#x} instead of the ack", peer, ack);
    }
  }
  return m;
}

}  // namespace dp::ring
