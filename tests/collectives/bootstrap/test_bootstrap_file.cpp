// The file bootstrap (a shared directory): worlds of forked processes, the timeout naming the
// missing ranks, inconsistent world sizes, files of another launch, cleanup, missing variables.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "collectives/bootstrap/factory.h"
#include "collectives/bootstrap/file.h"
#include "tests/collectives/multiproc.h"
#include "base/error.h"

namespace dp {
namespace {

using testing_mp::map_env;
using testing_mp::run_world;
namespace fs = std::filesystem;

class BootstrapFile : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            fmt::format("dptrain_fileboot_{}_{}", ::getpid(), testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  void expect_world_ok(int n) {
    auto res = run_world(n, [&](int rank, std::string& report) {
      auto b = make_file_bootstrap(dir_, 20,
                                   map_env({{"RANK", std::to_string(rank)}, {"WORLD_SIZE", std::to_string(n)}}));
      return testing_mp::check_bootstrap_world(*b, n, rank, report);
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(res[r].status, 0) << "rank " << r << ": " << res[r].message;
      EXPECT_EQ(res[r].message, fmt::format("ok rank={} size={} local={}/{} node=0", r, n, r, n));
    }
    // Rounds 0 (startup) .. 5 + n broadcasts + 1 barrier: only the last round's files remain.
    const int last = 5 + n + 1;
    std::vector<std::string> want;
    for (int r = 0; r < n; ++r) want.push_back(fmt::format("{}.{}", last, r));
    std::sort(want.begin(), want.end());
    EXPECT_EQ(listing(), want);
  }

  std::string dir_;
};

TEST_F(BootstrapFile, World2) { expect_world_ok(2); }
TEST_F(BootstrapFile, World3) { expect_world_ok(3); }
TEST_F(BootstrapFile, World4) { expect_world_ok(4); }
TEST_F(BootstrapFile, World8) { expect_world_ok(8); }

TEST_F(BootstrapFile, SlurmVariablesGiveRankSizeAndTopology) {
  auto res = run_world(4, [&](int rank, std::string& report) {
    auto b = make_file_bootstrap(dir_, 20,
                                 map_env({{"SLURM_PROCID", std::to_string(rank)},
                                          {"SLURM_NTASKS", "4"},
                                          {"SLURM_LOCALID", std::to_string(rank % 2)},
                                          {"SLURM_NODEID", std::to_string(rank / 2)},
                                          {"SLURMD_NODENAME", rank < 2 ? "n1" : "n2"}}));
    auto all = b->allgather(std::to_string(rank));
    report = fmt::format("{}/{} {}/{} node {} [{}]", b->rank(), b->size(), b->local_rank(), b->local_size(),
                         b->node_id(), fmt::join(all, ","));
    return 0;
  });
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(res[r].message, fmt::format("{}/4 {}/2 node {} [0,1,2,3]", r, r % 2, r / 2)) << res[r].status;
}

TEST_F(BootstrapFile, TimeoutNamesTheMissingRanks) {
  // A world of 4 where ranks 1 and 3 never start.
  auto res = run_world(2, [&](int i, std::string& report) {
    const int rank = i * 2;
    auto b = make_file_bootstrap(dir_, 0.5, map_env({{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "4"}}));
    return 1;
  });
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(res[i].status, 99);
    EXPECT_EQ(res[i].message, "bootstrap file: timed out after 0.5 s waiting for ranks 1, 3 of 4 in allgather #0 "
                              "(startup) (no file 0.<rank> from them in " + dir_ + ")");
  }
}

TEST_F(BootstrapFile, InconsistentWorldSize) {
  auto res = run_world(2, [&](int rank, std::string& report) {
    auto b = make_file_bootstrap(dir_, 10,
                                 map_env({{"RANK", std::to_string(rank)}, {"WORLD_SIZE", rank == 1 ? "3" : "2"}}));
    return 1;
  });
  EXPECT_EQ(res[0].status, 99);
  EXPECT_EQ(res[0].message, "bootstrap file: inconsistent world size: rank 1 was started with a world of 3 processes "
                            "(its file '" + dir_ + "/0.1'), this rank (0) with 2; start every process with the same "
                            "world size");
  EXPECT_EQ(res[1].status, 99);
  EXPECT_EQ(res[1].message, "bootstrap file: inconsistent world size: rank 0 was started with a world of 2 processes "
                            "(its file '" + dir_ + "/0.0'), this rank (1) with 3; start every process with the same "
                            "world size");
}

TEST_F(BootstrapFile, FilesOfAnotherLaunchAreIgnored) {
  // Rank 1's file of launch "old" is there: rank 0 of launch "new" must not take it.
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/0.1") << "dptrain-bootstrap-file 1 world=2 launch=old\nhost-of-old";
  try {
    make_file_bootstrap(dir_, 0.3, map_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"DPTRAIN_RUN_ID", "new"}}));
    FAIL() << "no error";
  } catch (const DpError& e) {
    EXPECT_EQ(std::string(e.what()),
              "bootstrap file: timed out after 0.3 s waiting for rank 1 of 2 in allgather #0 (startup) (no file "
              "0.<rank> from them in " + dir_ + "; '" + dir_ + "/0.1' is from another launch ('old', this one is 'new'))");
  }
  // With rank 1 of launch "new" present, the same directory works.
  auto res = run_world(2, [&](int rank, std::string& report) {
    auto b = make_file_bootstrap(
        dir_, 10, map_env({{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"}, {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "3"}}));
    report = fmt::format("{}", fmt::join(b->allgather(fmt::format("r{}", rank)), ","));
    return 0;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[r].message, "r0,r1");
  EXPECT_EQ(listing(), (std::vector<std::string>{"1.0", "1.1"}));
}

TEST_F(BootstrapFile, ForeignFileIsAClearError) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/0.1") << "hello";
  try {
    make_file_bootstrap(dir_, 5, map_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
    FAIL() << "no error";
  } catch (const DpError& e) {
    EXPECT_EQ(std::string(e.what()), "bootstrap file: '" + dir_ +
                                         "/0.1' is not a dptrain bootstrap file; use a directory of its own for the "
                                         "rendezvous");
  }
}

TEST_F(BootstrapFile, OwnLeftoversAreRemovedAtStart) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/7.0") << "dptrain-bootstrap-file 1 world=1 launch=\nstale";
  std::ofstream(dir_ + "/7.1") << "not ours: rank 1's";
  auto b = make_file_bootstrap(dir_, 5, map_env({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  EXPECT_EQ(b->allgather("a"), std::vector<std::string>{"a"});
  EXPECT_EQ(listing(), (std::vector<std::string>{"1.0", "7.1"}));
}

TEST_F(BootstrapFile, MissingVariablesAreNamed) {
  auto err = [&](std::map<std::string, std::string> env, std::string dir = "") {
    try {
      make_file_bootstrap(dir.empty() ? dir_ : dir, 1, map_env(std::move(env)));
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(err({}), "bootstrap file: no rank information: set RANK and WORLD_SIZE, or run under srun (SLURM_PROCID, "
                     "SLURM_NTASKS)");
  EXPECT_EQ(err({{"RANK", "1"}}), "bootstrap file: RANK is set but WORLD_SIZE is not");
  EXPECT_EQ(err({{"WORLD_SIZE", "1"}}), "bootstrap file: WORLD_SIZE is set but RANK is not");
  EXPECT_EQ(err({{"SLURM_PROCID", "0"}}), "bootstrap file: SLURM_PROCID is set but SLURM_NTASKS is not");
  EXPECT_EQ(err({{"RANK", "0"}, {"WORLD_SIZE", "1"}}, "relative/dir"),
            "bootstrap file: the rendezvous directory must be an absolute path (file:///shared/dir), not "
            "'relative/dir'");
}

}  // namespace
}  // namespace dp
