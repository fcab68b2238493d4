// The Slurm env bootstrap: rank 0's host from the node list, the port from the job id, local
// size from the tasks per node; worlds of forked processes with srun's variables.
#include <gtest/gtest.h>

#include <random>

#include "collectives/bootstrap/factory.h"
#include "collectives/bootstrap/slurm.h"
#include "tests/collectives/multiproc.h"
#include "base/error.h"

namespace dp {
namespace {

using testing_mp::map_env;
using testing_mp::run_world;

// A job id whose derived port (step 0) is free on 127.0.0.1 now.
int job_with_free_port() {
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  for (int tries = 0; tries < 200; ++tries) {
    const int job = static_cast<int>(rng() % 100000) * 1024 + static_cast<int>(rng() % 1024);
    const int port = slurm_store_port(static_cast<uint64_t>(job), 0);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) return job;
  }
  return -1;
}

TEST(BootstrapSlurm, PortFormula) {
  EXPECT_EQ(slurm_store_port(0, 0), 49152);
  EXPECT_EQ(slurm_store_port(1, 0), 49168);
  EXPECT_EQ(slurm_store_port(1, 3), 49171);
  EXPECT_EQ(slurm_store_port(1, 19), 49171);  // steps wrap every 16
  EXPECT_EQ(slurm_store_port(12345, 17), 49152 + 913);
  EXPECT_EQ(slurm_store_port(1024, 0), 49152);  // jobs 1024 apart share a port (documented)
  for (uint64_t j = 0; j < 5000; j += 7) {
    const int p = slurm_store_port(j * 977, j % 40);
    EXPECT_GE(p, 49152);
    EXPECT_LE(p, 65535);
  }
}

TEST(BootstrapSlurm, TwoNodesOfTwoTasks) {
  const int job = job_with_free_port();
  ASSERT_GE(job, 0) << "no free port in the dynamic range";
  auto res = run_world(4, [&](int rank, std::string& report) {
    auto b = make_slurm_bootstrap(20, map_env({{"SLURM_PROCID", std::to_string(rank)},
                                               {"SLURM_NTASKS", "4"},
                                               {"SLURM_LOCALID", std::to_string(rank % 2)},
                                               {"SLURM_NODEID", std::to_string(rank / 2)},
                                               {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                                               {"SLURM_STEP_NODELIST", "127.0.0.[1-2]"},
                                               {"SLURM_JOB_NODELIST", "elsewhere[1-9]"},
                                               {"SLURM_JOB_ID", std::to_string(job)},
                                               {"SLURM_STEP_ID", "0"}}));
    if (std::string(b->kind()) != "slurm") return 1;
    return testing_mp::check_bootstrap_world(*b, 4, rank, report);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(res[r].status, 0) << res[r].message;
    EXPECT_EQ(res[r].message, fmt::format("ok rank={} size=4 local={}/2 node={}", r, r % 2, r / 2));
  }
}

TEST(BootstrapSlurm, UnevenNodesAndDerivedLocalRank) {
  // Three tasks on n1, one on n2 (SLURM_TASKS_PER_NODE "3,1"); SLURM_LOCALID not given: derived.
  const int job = job_with_free_port();
  ASSERT_GE(job, 0);
  auto res = run_world(4, [&](int rank, std::string& report) {
    auto b = make_slurm_bootstrap(20, map_env({{"SLURM_PROCID", std::to_string(rank)},
                                               {"SLURM_NTASKS", "4"},
                                               {"SLURM_NODEID", rank < 3 ? "0" : "1"},
                                               {"SLURMD_NODENAME", rank < 3 ? "n1" : "n2"},
                                               {"SLURM_TASKS_PER_NODE", "3,1"},
                                               {"SLURM_JOB_NODELIST", "127.0.0.1,n2"},
                                               {"SLURM_JOB_ID", std::to_string(job)}}));
    report = fmt::format("{}/{} node {}", b->local_rank(), b->local_size(), b->node_id());
    return 0;
  });
  const std::vector<std::string> want = {"0/3 node 0", "1/3 node 0", "2/3 node 0", "0/1 node 1"};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(res[r].message, want[r]) << "rank " << r;
}

TEST(BootstrapSlurm, MasterAddrAndPortOverride) {
  const int port = testing_mp::free_port();
  auto res = run_world(2, [&](int rank, std::string& report) {
    auto b = make_slurm_bootstrap(20, map_env({{"SLURM_PROCID", std::to_string(rank)},
                                               {"SLURM_NTASKS", "2"},
                                               {"SLURM_JOB_NODELIST", "does-not-resolve[1-2]"},
                                               {"MASTER_ADDR", "127.0.0.1"},
                                               {"MASTER_PORT", std::to_string(port)}}));
    report = fmt::format("{}", fmt::join(b->allgather(std::to_string(rank + 5)), ","));
    return 0;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[r].message, "5,6");
}

TEST(BootstrapSlurm, MissingInformationIsNamed) {
  auto err = [](std::map<std::string, std::string> env) {
    try {
      make_slurm_bootstrap(1, map_env(std::move(env)));
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(err({{"SLURM_PROCID", "0"}}),
            "bootstrap slurm: SLURM_NTASKS is not set (srun sets SLURM_PROCID and SLURM_NTASKS for every task; run "
            "under srun)");
  EXPECT_EQ(err({}),
            "bootstrap slurm: SLURM_PROCID and SLURM_NTASKS are not set (srun sets SLURM_PROCID and SLURM_NTASKS for "
            "every task; run under srun)");
  EXPECT_EQ(err({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "5"}}),
            "bootstrap slurm: no node list (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST): cannot tell rank 0's host; set "
            "MASTER_ADDR");
  EXPECT_EQ(err({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n[1-2]"}}),
            "bootstrap slurm: SLURM_JOB_ID is not set: cannot derive the store's port; set MASTER_PORT");
  EXPECT_EQ(err({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}}),
            "bootstrap slurm: SLURM_PROCID=2 is not below SLURM_NTASKS=2");
  EXPECT_EQ(err({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n[1-"}, {"SLURM_JOB_ID", "5"}}),
            "bootstrap slurm: SLURM_JOB_NODELIST: hostlist 'n[1-': '[' without ']'");
  EXPECT_EQ(err({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "x"}}),
            "bootstrap slurm: SLURM_TASKS_PER_NODE 'x': 'x' is not N or N(xR)");
}

}  // namespace
}  // namespace dp
