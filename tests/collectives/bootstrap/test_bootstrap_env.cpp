// The env bootstrap (torchrun's variables, rank 0 serves a TCP store), with worlds of real
// processes forked by the test: allgather of several sizes (empty .. 1 MiB), broadcast, barrier,
// topology; the timeout names the missing ranks; a crashed rank, an inconsistent world size and
// missing variables are clear errors.
#include <gtest/gtest.h>

#include <chrono>

#include "collectives/bootstrap/factory.h"
#include "collectives/bootstrap/env.h"
#include "collectives/bootstrap/tcp_store.h"
#include "tests/collectives/multiproc.h"
#include "base/error.h"

namespace dp {
namespace {

using testing_mp::ChildResult;
using testing_mp::map_env;
using testing_mp::run_world;

std::map<std::string, std::string> torch_env(int rank, int size, int port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(size)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void expect_world_ok(int n) {
  const int port = testing_mp::free_port();
  auto res = run_world(n, [&](int rank, std::string& report) {
    auto b = make_env_bootstrap(20, map_env(torch_env(rank, n, port)));
    if (std::string(b->kind()) != "env") {
      report = "kind " + std::string(b->kind());
      return 1;
    }
    return testing_mp::check_bootstrap_world(*b, n, rank, report);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(res[r].status, 0) << "rank " << r << ": " << res[r].message;
    EXPECT_EQ(res[r].message, fmt::format("ok rank={} size={} local={}/{} node=0", r, n, r, n));
  }
}

TEST(BootstrapEnv, World2) { expect_world_ok(2); }
TEST(BootstrapEnv, World3) { expect_world_ok(3); }
TEST(BootstrapEnv, World4) { expect_world_ok(4); }
TEST(BootstrapEnv, World8) { expect_world_ok(8); }

TEST(BootstrapEnv, WorldOfOneNeedsNoStore) {
  // No server, no connection: MASTER_PORT may be anything.
  auto b = make_env_bootstrap(1, map_env(torch_env(0, 1, 1)));
  EXPECT_EQ(b->allgather("x"), std::vector<std::string>{"x"});
  EXPECT_EQ(b->broadcast("y", 0), "y");
  EXPECT_EQ(b->local_size(), 1);
}

TEST(BootstrapEnv, RankZeroStartingLateIsWaitedFor) {
  const int port = testing_mp::free_port();
  auto res = run_world(3, [&](int rank, std::string& report) {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(700));
    auto b = make_env_bootstrap(20, map_env(torch_env(rank, 3, port)));
    auto all = b->allgather(std::to_string(rank * 10));
    report = fmt::format("{},{},{}", all[0], all[1], all[2]);
    return 0;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(res[r].status, 0) << res[r].message;
    EXPECT_EQ(res[r].message, "0,10,20");
  }
}

TEST(BootstrapEnv, GivenTopologyIsKept) {
  // Two "nodes" of two: torchrun's LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK are used as given.
  const int port = testing_mp::free_port();
  auto res = run_world(4, [&](int rank, std::string& report) {
    auto env = torch_env(rank, 4, port);
    env["LOCAL_RANK"] = std::to_string(rank % 2);
    env["LOCAL_WORLD_SIZE"] = "2";
    env["GROUP_RANK"] = std::to_string(rank / 2);
    auto b = make_env_bootstrap(20, map_env(env));
    report = fmt::format("{}/{} node {}", b->local_rank(), b->local_size(), b->node_id());
    return 0;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(res[r].message, fmt::format("{}/2 node {}", r % 2, r / 2));
}

TEST(BootstrapEnv, TopologyDerivedFromHostNames) {
  // Ranks alternate between hosts "b" and "a": node ids follow the lowest rank of each host.
  const int port = testing_mp::free_port();
  auto res = run_world(5, [&](int rank, std::string& report) {
    auto env = torch_env(rank, 5, port);
    env["SLURMD_NODENAME"] = rank % 2 == 0 ? "b" : "a";
    auto b = make_env_bootstrap(20, map_env(env));
    report = fmt::format("{}/{} node {}", b->local_rank(), b->local_size(), b->node_id());
    return 0;
  });
  const std::vector<std::string> want = {"0/3 node 0", "0/2 node 1", "1/3 node 0", "1/2 node 1", "2/3 node 0"};
  for (int r = 0; r < 5; ++r) EXPECT_EQ(res[r].message, want[r]) << "rank " << r;
}

TEST(BootstrapEnv, TimeoutAtStartupNamesTheMissingRank) {
  // A world of 3 where rank 2 never starts.
  const int port = testing_mp::free_port();
  const auto t0 = std::chrono::steady_clock::now();
  auto res = run_world(2, [&](int rank, std::string& report) {
    auto b = make_env_bootstrap(1, map_env(torch_env(rank, 3, port)));
    report = "constructed";
    return 0;
  });
  EXPECT_LT(seconds_since(t0), 4.0);
  EXPECT_EQ(res[0].status, 99);
  EXPECT_EQ(res[0].message, "bootstrap env: timed out after 1 s waiting for rank 2 of 3 in allgather #0 (startup)");
  // Rank 1 times out too (rank 0's store lingers for it after its own timeout).
  EXPECT_EQ(res[1].status, 99);
  EXPECT_EQ(res[1].message, res[0].message);
}

TEST(BootstrapEnv, TimeoutInALaterAllgatherNamesTheMissingRanks) {
  // Ranks 2 and 3 of 5 leave properly after the startup exchange; the others wait for them in #1.
  const int port = testing_mp::free_port();
  auto res = run_world(5, [&](int rank, std::string& report) {
    auto b = make_env_bootstrap(1, map_env(torch_env(rank, 5, port)));
    if (rank == 2 || rank == 3) return 0;
    b->allgather("x");
    return 1;
  });
  for (int r : {0, 1, 4}) {
    EXPECT_EQ(res[r].status, 99);
    EXPECT_EQ(res[r].message, "bootstrap env: timed out after 1 s waiting for ranks 2, 3 of 5 in allgather #1")
        << "rank " << r;
  }
}

TEST(BootstrapEnv, CrashedRankFailsTheOthersAtOnce) {
  // Rank 2 dies without leaving: the others do not wait for the 20 s timeout.
  const int port = testing_mp::free_port();
  const auto t0 = std::chrono::steady_clock::now();
  auto res = run_world(3, [&](int rank, std::string& report) {
    auto b = make_env_bootstrap(20, map_env(torch_env(rank, 3, port)));
    if (rank == 2) ::_exit(42);
    b->allgather("x");
    return 1;
  });
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(res[2].status, 42);
  // Each names rank 2 as lost; what else it waited for depends on who asked first.
  const std::string head = "bootstrap env: rank 2 of 3 left without a goodbye (exited or crashed?) while this rank "
                           "waited for ";
  EXPECT_EQ(res[0].status, 99);
  EXPECT_TRUE(res[0].message == head + "rank 2 in allgather #1" || res[0].message == head + "ranks 1, 2 in allgather #1")
      << res[0].message;
  EXPECT_EQ(res[1].status, 99);
  EXPECT_TRUE(res[1].message == head + "rank 2 in allgather #1" || res[1].message == head + "ranks 0, 2 in allgather #1")
      << res[1].message;
}

TEST(BootstrapEnv, InconsistentWorldSizeIsAClearErrorOnEveryRank) {
  const int port = testing_mp::free_port();
  auto res = run_world(2, [&](int rank, std::string& report) {
    auto b = make_env_bootstrap(10, map_env(torch_env(rank, rank == 1 ? 3 : 2, port)));
    return 1;
  });
  const std::string want =
      "bootstrap env: inconsistent world size: rank 1 was started with a world of 3 processes, rank 0 (serving the "
      "TCP store) with 2; start every process with the same world size";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].status, 99);
    EXPECT_EQ(res[r].message, want) << "rank " << r;
  }
}

TEST(BootstrapEnv, TwoProcessesClaimingOneRank) {
  const int port = testing_mp::free_port();
  auto res = run_world(3, [&](int rank, std::string& report) {
    auto b = make_env_bootstrap(10, map_env(torch_env(rank == 2 ? 1 : rank, 3, port)));
    return 1;
  });
  int told = 0;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(res[r].status, 99);
    told += res[r].message ==
            "bootstrap env: two processes say they are rank 1 (check each process's rank variable)";
  }
  EXPECT_EQ(told, 3);
}

TEST(BootstrapEnv, MissingVariablesAreNamed) {
  try {
    make_env_bootstrap(1, map_env({{"RANK", "0"}, {"MASTER_ADDR", "x"}}));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "bootstrap env: missing environment variables WORLD_SIZE, MASTER_PORT (a torchrun-style launcher sets "
                 "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)");
  }
  try {
    make_env_bootstrap(1, map_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "x"}}));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "bootstrap env: missing environment variable MASTER_PORT (a torchrun-style launcher sets RANK, "
                 "WORLD_SIZE, MASTER_ADDR and MASTER_PORT)");
  }
}

TEST(BootstrapEnv, BadValuesAreNamed) {
  auto err = [](std::map<std::string, std::string> env) {
    try {
      make_env_bootstrap(1, map_env(std::move(env)));
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(err(torch_env(0, 2, 70000)), "bootstrap env: MASTER_PORT='70000' is not an integer in [1, 65535]");
  auto e = torch_env(0, 2, 1234);
  e["RANK"] = "one";
  EXPECT_EQ(err(e), "bootstrap env: RANK='one' is not an integer in [0, 16777216]");
  EXPECT_EQ(err(torch_env(2, 2, 1234)),
            "bootstrap env: RANK=2 is not below WORLD_SIZE=2 (ranks go from 0 to WORLD_SIZE-1)");
  e = torch_env(0, 2, 1234);
  e["LOCAL_RANK"] = "-1";
  EXPECT_EQ(err(e), "bootstrap env: LOCAL_RANK='-1' is not an integer in [0, 1]");
}

TEST(BootstrapEnv, PortInUseIsAClearError) {
  // Someone else listens on the port: rank 0 says so at once.
  UniqueFd holder(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(holder.get(), 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  try {
    make_env_bootstrap(1, map_env(torch_env(0, 2, port)));
    FAIL() << "no error";
  } catch (const DpError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("bootstrap env: rank 0 cannot listen on 127.0.0.1:{} for the TCP store: Address already in "
                          "use (errno 98) (another process uses this port: choose a free port)",
                          port));
  }
}

TEST(BootstrapEnv, NoStoreIsAClearErrorAfterTheTimeout) {
  const int port = testing_mp::free_port();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    make_env_bootstrap(0.5, map_env(torch_env(1, 2, port)));
    FAIL() << "no error";
  } catch (const DpError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("bootstrap env: rank 1 could not connect to the TCP store at 127.0.0.1:{} (served by rank 0) "
                          "within 0.5 s: Connection refused (errno 111); is rank 0 running, and is the address right?",
                          port));
  }
  const double s = seconds_since(t0);
  EXPECT_GT(s, 0.25);
  EXPECT_LT(s, 1.5);
}

// ---- the store itself ----

TEST(TcpStore, TimeoutReportsWhichKeysExistAndDeleteRemoves) {
  TcpStoreServer server("t", "127.0.0.1", 0, 2);
  TcpStoreClient c0("t", "127.0.0.1", server.port(), 0, 2, 5);
  TcpStoreClient c1("t", "127.0.0.1", server.port(), 1, 2, 5);
  auto r = c0.transact({}, {{"a", "1"}}, {"a", "b"}, 0.2);
  EXPECT_EQ(r.status, TcpStoreClient::Result::Timeout);
  EXPECT_EQ(r.present, (std::vector<bool>{true, false}));
  r = c1.transact({}, {{"b", std::string(3, '\0')}}, {"b", "a"}, 1);
  ASSERT_EQ(r.status, TcpStoreClient::Result::Ok);
  EXPECT_EQ(r.values, (std::vector<std::string>{std::string(3, '\0'), "1"}));
  r = c0.transact({"a"}, {}, {"a", "b"}, 0.1);
  EXPECT_EQ(r.status, TcpStoreClient::Result::Timeout);
  EXPECT_EQ(r.present, (std::vector<bool>{false, true}));
}

}  // namespace
}  // namespace dp
