// Choosing a bootstrap: the auto-detection order, partial launcher information as a clear error,
// explicit kinds, the process identity set for error and log prefixes.
#include <gtest/gtest.h>

#include <filesystem>

#include "collectives/bootstrap/factory.h"
#include "tests/collectives/multiproc.h"
#include "base/error.h"

namespace dp {
namespace {

using testing_mp::map_env;
using testing_mp::run_world;
using Env = std::map<std::string, std::string>;

std::string detect(Env env) { return detect_bootstrap(map_env(std::move(env))); }

std::string detect_error(Env env) {
  try {
    return "no error: " + detect_bootstrap(map_env(std::move(env)));
  } catch (const UserError& e) {
    return e.what();
  }
}

const Env kTorch = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}};
const Env kSrun = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}};

Env merged(Env a, const Env& b) {
  a.insert(b.begin(), b.end());
  return a;
}

TEST(BootstrapAuto, DetectionOrder) {
  EXPECT_EQ(detect({}), "single");
  EXPECT_EQ(detect(kSrun), "slurm");
  EXPECT_EQ(detect(merged(kTorch, kSrun)), "env");  // torchrun inside an srun step
  EXPECT_EQ(detect(merged({{"PMI_FD", "5"}, {"PMI_RANK", "0"}}, merged(kTorch, kSrun))), "pmi2");
  EXPECT_EQ(detect({{"PMI_RANK", "0"}}), "pmi2");
  EXPECT_EQ(detect(merged({{"PMIX_RANK", "0"}, {"PMI_FD", "5"}}, merged(kTorch, kSrun))), "pmix");
  // MASTER_ADDR alone (left in a shell) is no launcher.
  EXPECT_EQ(detect({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}), "single");
}

TEST(BootstrapAuto, BatchScriptWithoutSrunIsOneProcess) {
  EXPECT_EQ(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "9"}}), "single");
  EXPECT_EQ(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "4294967291"}}), "single");
  EXPECT_EQ(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEPID", "3"}}), "slurm");
}

TEST(BootstrapAuto, PartialLauncherInformationNamesTheMissingVariables) {
  EXPECT_EQ(detect_error({{"RANK", "1"}}),
            "bootstrap auto: RANK is set but WORLD_SIZE, MASTER_ADDR, MASTER_PORT are not: a torchrun-style launcher "
            "sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (for a rendezvous through a shared directory instead, "
            "choose the bootstrap file:///shared/dir)");
  EXPECT_EQ(detect_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
            "bootstrap auto: RANK, WORLD_SIZE, MASTER_ADDR are set but MASTER_PORT is not: a torchrun-style launcher "
            "sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (for a rendezvous through a shared directory instead, "
            "choose the bootstrap file:///shared/dir)");
  EXPECT_EQ(detect_error({{"SLURM_PROCID", "3"}}),
            "bootstrap auto: SLURM_PROCID is set but SLURM_NTASKS is not: srun sets both for every task");
}

TEST(BootstrapAuto, ExplicitKindsAndUnknownOnes) {
  auto b = make_bootstrap("single", 1, map_env(kTorch));
  EXPECT_STREQ(b->kind(), "single");
  EXPECT_EQ(b->size(), 1);
  EXPECT_EQ(b->allgather("z"), std::vector<std::string>{"z"});
  b = make_bootstrap("auto", 1, map_env({}));
  EXPECT_STREQ(b->kind(), "single");
  try {
    make_bootstrap("slrum", 1, map_env({}));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "unknown bootstrap 'slrum' (did you mean 'slurm'?); use one of auto, pmix, pmi2, env, "
                           "slurm, single or file:///shared/dir");
  }
  try {
    make_bootstrap("env", 1, map_env({{"RANK", "0"}}));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "bootstrap env: missing environment variables WORLD_SIZE, MASTER_ADDR, MASTER_PORT (a "
                           "torchrun-style launcher sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)");
  }
}

TEST(BootstrapAuto, AutoEnvWorldSetsTheProcessIdentity) {
  const int port = testing_mp::free_port();
  auto res = run_world(3, [&](int rank, std::string& report) {
    auto b = make_bootstrap("auto", 20,
                            map_env({{"RANK", std::to_string(rank)},
                                     {"WORLD_SIZE", "3"},
                                     {"MASTER_ADDR", "127.0.0.1"},
                                     {"MASTER_PORT", std::to_string(port)}}));
    report = std::string(b->kind()) + " " + identity_string();
    return 0;
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(res[r].message, fmt::format("env rank {}/3 on {}", r, process_identity().host)) << res[r].status;
}

TEST(BootstrapAuto, FileSpecWithTheProcessIdentity) {
  const std::string dir = fmt::format("/tmp/dptrain_autofile_{}", ::getpid());
  auto res = run_world(2, [&](int rank, std::string& report) {
    auto b = make_bootstrap("file://" + dir, 20, map_env({{"SLURM_PROCID", std::to_string(rank)}, {"SLURM_NTASKS", "2"}}));
    report = std::string(b->kind()) + " " + identity_string();
    return 0;
  });
  std::filesystem::remove_all(dir);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(res[r].message, fmt::format("file rank {}/2 on {}", r, process_identity().host)) << res[r].status;
}

}  // namespace
}  // namespace dp
