// Automatic restarts through the real binary (`dptrain --nproc 2 --max-restarts K`, the CNN on
// 1024 Fashion-MNIST samples, batch 32 x 2 ranks, 28 steps, a checkpoint every 8):
//   - rank 1 killed (kill -9, DPTRAIN_FAULT_KILL_AFTER_STEP=20 with DPTRAIN_FAULT_KILL_RANK=1)
//     under --max-restarts 1: the job exits 0, its final weights and last checkpoint are bitwise
//     a straight run's, and the restart is one launcher line and one metrics.jsonl line naming
//     rank 1, SIGKILL, step 16 resumed from and 4 steps lost;
//   - the same kill under --max-restarts 0: today's failure (status 137, rank 1 named, no restart);
//   - a worker's input error (status 2) under --max-restarts 2: one launch, status 2, no restart;
//   - a rank that dies in every launch (DPTRAIN_FAULT_KILL_LAUNCHES) under --max-restarts 2:
//     three launches, then status 137 and the giving-up line.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/fashion_mnist.h"
#include "tests/launch/run_files.h"

namespace {

using dp::testutil::differing;
using dp::testutil::read_file;
using dp::testutil::tensors_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
constexpr int kSteps = 28;

// A fresh folder for one run, removed when the test ends (also when an ASSERT ends it early).
class TempRoot {
 public:
  explicit TempRoot(const std::string& tag)
      : path_((fs::temp_directory_path() / ("dptrain_restart_" + tag + "_" + std::to_string(::getpid()))).string()) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempRoot() { fs::remove_all(path_); }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;
  operator const std::string&() const { return path_; }

 private:
  std::string path_;
};

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// `[env] dptrain --nproc 2 [launcher args] fmnist_cnn.cfg` into root/c/.
Outcome dptrain(const std::string& root, const std::string& launcher_args, const std::string& env = "",
                const std::string& extra_sets = "") {
  const std::string log = root + "/out.log";
  const std::string cmd = env + (env.empty() ? "" : " ") + kBin + " --nproc 2 " + launcher_args + " " +
                          DPTRAIN_SOURCE_DIR + "/models/fmnist_cnn.cfg --run-dir " + root +
                          " --name c --log-level info" + dp::test::fashion_mnist_set() +
                          " --set data.train_limit=1024 data.eval_limit=64 train.steps=" + std::to_string(kSteps) +
                          " train.batch_size=32 train.warmup_steps=4 train.log_every=4 train.threads=1"
                          " checkpoint.every_steps=8 checkpoint.keep=0" +
                          extra_sets + " > " + log + " 2>&1";
  const int st = std::system(cmd.c_str());
  Outcome r;
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.output = cmd + "\n" + read_file(log);
  return r;
}

// The launcher's own lines ("dptrain: ...", not a worker's "[rank r] ...").
std::vector<std::string> launcher_lines(const std::string& output) {
  std::vector<std::string> out;
  std::istringstream in(output);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("dptrain: ", 0) == 0) out.push_back(l);
  return out;
}

std::vector<nlohmann::json> restart_records(const std::string& metrics_path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(metrics_path));
  for (std::string l; std::getline(in, l);) {
    const auto j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_object() && j.value("split", "") == "restart") out.push_back(j);
  }
  return out;
}

std::string host() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

std::string ckpt(const std::string& root, int step) {
  return fmt::format("{}/c/checkpoints/step-{:08}.safetensors", root, step);
}

const std::string kKillRank1 = "DPTRAIN_FAULT_KILL_AFTER_STEP=20 DPTRAIN_FAULT_KILL_RANK=1";

TEST(Restart, RankKilledAfterStep20IsRestartedAndEndsBitwiseAsAStraightRun) {
  SKIP_WITHOUT_FASHION_MNIST();
  const TempRoot root_a("straight"), root_b("restarted");
  const std::string &a = root_a, &b = root_b;
  const Outcome straight = dptrain(a, "");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  const Outcome r = dptrain(b, "--max-restarts 1", kKillRank1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = launcher_lines(r.output);
  ASSERT_EQ(lines.size(), 2u) << r.output;
  EXPECT_EQ(lines[0], "dptrain: rank 1 was killed by signal 9 (SIGKILL); stopping the other 1 worker") << r.output;
  EXPECT_THAT(lines[1], HasSubstr("dptrain: restart 1 of 1: rank 1 on " + host() + " was killed by signal 9 (SIGKILL); "));
  EXPECT_THAT(lines[1], HasSubstr("resuming from step 16 (4 steps lost); starting the 2 workers again")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[rank 0] ")) << r.output;
  EXPECT_THAT(read_file(b + "/c/logs/rank-1.log"), HasSubstr("resumed from " + ckpt(b, 16) + ": step 16"));

  const auto rec = restart_records(b + "/c/metrics.jsonl");
  ASSERT_EQ(rec.size(), 1u) << read_file(b + "/c/metrics.jsonl");
  EXPECT_EQ(rec[0]["restart"], 1);
  EXPECT_EQ(rec[0]["rank"], 1);
  EXPECT_EQ(rec[0]["host"], host());
  EXPECT_EQ(rec[0]["signal"], 9);
  EXPECT_EQ(rec[0]["signal_name"], "SIGKILL");
  EXPECT_EQ(rec[0]["exit_status"], 137);
  EXPECT_EQ(rec[0]["resume_step"], 16);
  EXPECT_EQ(rec[0]["last_step"], 20);
  EXPECT_EQ(rec[0]["steps_lost"], 4);

  // flightrec shows the restart as an event; its flight records moved aside.
  const std::string fr = b + "/flightrec.txt";
  ASSERT_EQ(std::system((std::string(DPTRAIN_BINARY_DIR) + "/flightrec " + b + "/c > " + fr + " 2>&1").c_str()), 0)
      << read_file(fr);
  EXPECT_THAT(read_file(fr), ::testing::StartsWith("restart 1 of 1: rank 1 on " + host() +
                                                   " was killed by signal 9 (SIGKILL); resumed from step 16 (4 steps "
                                                   "lost); the watchdog: "))
      << read_file(fr);
  EXPECT_THAT(read_file(fr), HasSubstr("\nno flight record since restart 1 (each restart's records: "
                                       "flight/before-restart-<k>/)\n"));
  EXPECT_TRUE(fs::exists(b + "/c/flight/before-restart-1/rank-0.json"));

  EXPECT_EQ(differing(tensors_of(ckpt(a, kSteps)), tensors_of(ckpt(b, kSteps))), std::vector<std::string>{});
  // Every tensor's bytes (the files' metadata differ: the resolved cfg names the run directory).
  EXPECT_EQ(differing(tensors_of(a + "/c/final.safetensors"), tensors_of(b + "/c/final.safetensors")),
            std::vector<std::string>{})
      << "final weights differ from the straight run's";
}

TEST(Restart, MaxRestartsZeroFailsAsBeforeNamingTheDeadRank) {
  SKIP_WITHOUT_FASHION_MNIST();
  const TempRoot root_b("zero");
  const std::string& b = root_b;
  const Outcome r = dptrain(b, "--max-restarts 0", kKillRank1);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  EXPECT_EQ(launcher_lines(r.output),
            std::vector<std::string>{"dptrain: rank 1 was killed by signal 9 (SIGKILL); stopping the other 1 worker"})
      << r.output;
  EXPECT_EQ(restart_records(b + "/c/metrics.jsonl").size(), 0u);
  EXPECT_FALSE(fs::exists(b + "/c/final.safetensors"));
}

TEST(Restart, InputErrorIsNotRetried) {
  SKIP_WITHOUT_FASHION_MNIST();
  const TempRoot root_b("input_error");
  const std::string& b = root_b;
  // The launcher checks the cfg; the data folder is the workers' to open: each exits with 2.
  const Outcome r = dptrain(b, "--max-restarts 2", "", " data.path=" + b + "/no-such-folder");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const auto lines = launcher_lines(r.output);
  ASSERT_EQ(lines.size(), 2u) << r.output;
  EXPECT_THAT(lines[0], ::testing::StartsWith("dptrain: rank ")) << r.output;
  EXPECT_THAT(lines[0], HasSubstr(" exited with status 2")) << r.output;
  EXPECT_THAT(lines[1], ::testing::MatchesRegex("dptrain: not restarting: rank [01] exited with status 2, a cfg or "
                                                "input error that every attempt would repeat; exiting with status 2"))
      << r.output;
  EXPECT_EQ(restart_records(b + "/c/metrics.jsonl").size(), 0u);
}

TEST(Restart, RankThatKeepsDyingStopsTheJobAfterKRestarts) {
  SKIP_WITHOUT_FASHION_MNIST();
  const TempRoot root_b("keeps_dying");
  const std::string& b = root_b;
  const Outcome r = dptrain(b, "--max-restarts 2",
                            "DPTRAIN_FAULT_KILL_AFTER_STEP=2 DPTRAIN_FAULT_KILL_RANK=1 DPTRAIN_FAULT_KILL_LAUNCHES=100");
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  const auto lines = launcher_lines(r.output);
  ASSERT_EQ(lines.size(), 6u) << r.output;
  for (int i : {0, 2, 4})
    EXPECT_EQ(lines[i], "dptrain: rank 1 was killed by signal 9 (SIGKILL); stopping the other 1 worker") << r.output;
  EXPECT_THAT(lines[1], HasSubstr("dptrain: restart 1 of 2: rank 1 on "));
  EXPECT_THAT(lines[1], HasSubstr("no checkpoint yet: starting over from step 0 (2 steps lost)"));
  EXPECT_THAT(lines[3], HasSubstr("dptrain: restart 2 of 2: rank 1 on "));
  EXPECT_EQ(lines[5], "dptrain: rank 1 was killed by signal 9 (SIGKILL) after 2 restarts (--max-restarts 2): giving "
                      "up; exiting with status 137");
  EXPECT_EQ(restart_records(b + "/c/metrics.jsonl").size(), 2u);
}

}  // namespace
