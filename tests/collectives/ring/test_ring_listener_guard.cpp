// The ring's setup listeners against strangers (issue 14): while rank 0 waits for its peers'
// connections, someone who read the published address (listener nonce included) connects and
// stays silent, sends garbage, and sends a hello as rank 1 without the job token's proof. The
// setup still completes (the silent connection cannot stall it, the fake hello cannot take rank
// 1's slot) and the collectives are exact.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "collectives/ring/ring_communicator.h"
#include "tests/collectives/ring_harness.h"

namespace dp {
namespace {

int connect_to(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Passes everything to the real bootstrap; on rank 0, once the ring's addresses are exchanged,
// attacks rank 0's own listener before the ring gets to accept.
class AttackedBootstrap final : public Bootstrap {
 public:
  explicit AttackedBootstrap(Bootstrap& inner) : in_(inner) {}
  ~AttackedBootstrap() override {
    for (int fd : held_) ::close(fd);
  }
  const char* kind() const override { return in_.kind(); }
  int rank() const override { return in_.rank(); }
  int size() const override { return in_.size(); }
  int local_rank() const override { return in_.local_rank(); }
  int local_size() const override { return in_.local_size(); }
  int node_id() const override { return in_.node_id(); }
  const std::string& job_token() const override { return in_.job_token(); }
  std::vector<std::string> allgather(const std::string& mine) override {
    auto all = in_.allgather(mine);
    if (rank() == 0 && !attacked_ && std::count(mine.begin(), mine.end(), ':') == 4) {
      attacked_ = true;
      attack(mine);
    }
    return all;
  }

 private:
  // mine = "host:port:nonce:node:shm"
  void attack(const std::string& mine) {
    const size_t c1 = mine.find(':'), c2 = mine.find(':', c1 + 1), c3 = mine.find(':', c2 + 1);
    const std::string host = mine.substr(0, c1);
    const int port = std::stoi(mine.substr(c1 + 1, c2 - c1 - 1));
    const uint64_t nonce = std::stoull(mine.substr(c2 + 1, c3 - c2 - 1), nullptr, 16);
    held_.push_back(connect_to(host, port));  // silent, held open
    int garbage = connect_to(host, port);
    char junk[80];
    std::memset(junk, 0x5a, sizeof junk);
    [[maybe_unused]] ssize_t n = ::send(garbage, junk, sizeof junk, MSG_NOSIGNAL);
    held_.push_back(garbage);
    // A hello as rank 1 (data connection) with the right nonce and a made-up proof: the layout of
    // collectives/ring/mesh.cpp's Hello (version 2, 80 bytes).
    struct {
      uint32_t magic = 0x47525044, version = 2, kind = 0;
      int32_t rank = 1, size = 0;
      uint32_t pad = 0;
      uint64_t nonce = 0;
      uint8_t client_nonce[16] = {};
      uint8_t mac[32] = {};
    } h;
    h.size = size();
    h.nonce = nonce;
    int fake = connect_to(host, port);
    n = ::send(fake, &h, sizeof h, MSG_NOSIGNAL);
    held_.push_back(fake);
  }
  Bootstrap& in_;
  bool attacked_ = false;
  std::vector<int> held_;
};

TEST(RingListenerGuard, SilentGarbageAndFakeHellosDoNotStallOrJoinTheSetup) {
  auto rs = ringtest::run_ranks(
      3,
      [&](Bootstrap& bs, ringtest::SharedState* s, int r) {
        AttackedBootstrap attacked(bs);
        auto comm = make_ring_communicator(attacked, 8);
        Tensor t = Tensor::zeros({100}, DType::I32);
        for (int i = 0; i < 100; ++i) t.data<int32_t>()[i] = (r + 1) * i;
        comm->allreduce(t, ReduceOp::Sum);
        for (int i = 0; i < 100; ++i)
          if (t.data<int32_t>()[i] != 6 * i) {
            ringtest::report(s, r, fmt::format("element {} is {}", i, t.data<int32_t>()[i]));
            return 1;
          }
        return 0;
      },
      /*limit_s=*/40);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

}  // namespace
}  // namespace dp
