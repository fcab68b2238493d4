// The ring communicator over the project's real bootstraps (make_bootstrap): the shared-file
// rendezvous and torchrun's env convention with rank 0's TCP store, each child setting the
// variables a launcher would. Each rank contributes rank-dependent values; the results are
// checked exactly.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <filesystem>

#include "collectives/bootstrap/factory.h"
#include "collectives/ring/ring_communicator.h"
#include "tests/collectives/ring_harness.h"

namespace dp {
namespace {

// A few collectives with exact integer results; returns 0 when all match.
int exercise(Communicator& comm, ringtest::SharedState* s) {
  const int n = comm.size(), r = comm.rank();
  Tensor t = Tensor::zeros({1000}, DType::I32);
  for (int i = 0; i < 1000; ++i) t.data<int32_t>()[i] = (r + 1) * i;
  comm.allreduce(t, ReduceOp::Sum);
  for (int i = 0; i < 1000; ++i)
    if (t.data<int32_t>()[i] != n * (n + 1) / 2 * i) {
      ringtest::report(s, r, fmt::format("allreduce element {} is {}", i, t.data<int32_t>()[i]));
      return 1;
    }
  Tensor in = Tensor::zeros({3}, DType::F64), out = Tensor::zeros({3 * n}, DType::F64);
  in.fill_(r + 0.5);
  comm.allgather(in, out);
  for (int q = 0; q < n; ++q)
    if (out.data<double>()[3 * q + 2] != q + 0.5) {
      ringtest::report(s, r, fmt::format("allgather block {} is {}", q, out.data<double>()[3 * q + 2]));
      return 1;
    }
  comm.barrier();
  return 0;
}

std::string fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / fmt::format("dptrain-ring-{}-{}", name, getpid());
  std::filesystem::remove_all(dir);
  return dir.string();
}

TEST(RingBootstraps, FileRendezvous) {
  const std::string dir = fresh_dir("file");
  auto rs = ringtest::run_ranks(
      3,
      [&](Bootstrap&, ringtest::SharedState* s, int r) {
        setenv("RANK", std::to_string(r).c_str(), 1);
        setenv("WORLD_SIZE", "3", 1);
        auto bs = make_bootstrap("file://" + dir, 20);
        auto comm = make_ring_communicator(*bs, 20);
        return exercise(*comm, s);
      },
      /*limit_s=*/60);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(RingBootstraps, EnvTcpStore) {
  const int port = free_port();
  auto rs = ringtest::run_ranks(
      4,
      [&](Bootstrap&, ringtest::SharedState* s, int r) {
        setenv("RANK", std::to_string(r).c_str(), 1);
        setenv("WORLD_SIZE", "4", 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
        auto bs = make_bootstrap("env", 20);
        auto comm = make_ring_communicator(*bs, 20);
        return exercise(*comm, s);
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

}  // namespace
}  // namespace dp
