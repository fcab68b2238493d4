// The CPU libraries' environment (kernels/cpu/cpu_env.h): the wait-policy decision alone, and
// the real binary: what a training run logs with no choice, with the user's policy and spin count.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/cpu/cpu_env.h"

namespace dp::kernels::cpu {
namespace {

TEST(CpuEnv, SpinsBrieflyUnlessTheUserChose) {
  EXPECT_STREQ(default_gomp_spincount(nullptr, nullptr), "10000");
  EXPECT_EQ(default_gomp_spincount("active", nullptr), nullptr);
  EXPECT_EQ(default_gomp_spincount("passive", nullptr), nullptr);
  EXPECT_EQ(default_gomp_spincount(nullptr, "300000"), nullptr);
  EXPECT_EQ(default_gomp_spincount("", nullptr), nullptr);  // set, even if empty: the user's
}

// This test binary's main went through ensure_cpu_env too.
TEST(CpuEnv, ThisProcessHasASpinCountOrTheUsersWaitPolicy) {
  EXPECT_TRUE(std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr);
}

// The re-exec went through /proc/self/exe, yet the process keeps its program's name (ps, top,
// pkill and the multi-host tests' process counts look for it): "exe" before the fix.
TEST(CpuEnv, TheReExecKeepsTheProgramsName) {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  EXPECT_EQ(name, "test_launch");
}

// The line a 2-step training run logs about its threads, run with `env_prefix`.
std::string threads_line(const std::string& env_prefix) {
  const auto dir = std::filesystem::temp_directory_path() / ("dptrain_cpu_env_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cfg = (dir / "m.cfg").string(), log = (dir / "log").string();
  std::ofstream(cfg) << "[run]\ndir = \"" << (dir / "runs").string()
                     << "\"\n[data]\ndataset = \"synthetic\"\nsynthetic_train = 64\nsynthetic_eval = 16\n"
                        "synthetic_shape = [1, 4, 4]\n[model]\npreset = \"mlp\"\nhidden = [8]\n"
                        "[train]\nsteps = 2\nbatch_size = 16\nthreads = 1\n[checkpoint]\nfinal = false\n";
  const std::string cmd = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + env_prefix + " " DPTRAIN_BINARY_DIR
                          "/dptrain " + cfg + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string line, found = "exit " + std::to_string(rc) + ", no 'CPU threads' line";
  while (std::getline(in, line))
    if (const size_t at = line.find("CPU threads: "); at != std::string::npos) found = line.substr(at);
  std::filesystem::remove_all(dir);
  return found;
}

TEST(CpuEnv, DptrainLogsHowItsThreadsWait) {
  const std::string head = "CPU threads: 1 (OpenMP, shared by oneDNN, OpenBLAS and the own kernels; waits: ";
  EXPECT_EQ(threads_line(""), head + "GOMP_SPINCOUNT=10000)");
  EXPECT_EQ(threads_line("OMP_WAIT_POLICY=active"), head + "OMP_WAIT_POLICY=active)");
  EXPECT_EQ(threads_line("GOMP_SPINCOUNT=1000"), head + "GOMP_SPINCOUNT=1000)");
}

}  // namespace
}  // namespace dp::kernels::cpu
