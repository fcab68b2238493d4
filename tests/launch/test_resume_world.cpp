// A run resumed with another number of processes ends where a straight run of the new number
// ends: same last step, same epoch and data position, same learning rate (the schedule follows
// the samples seen, launch/train_setup.h step_at_position). Through the real binary: N ranks
// killed (kill -9, DPTRAIN_FAULT_KILL_AFTER_STEP) right after a checkpoint, the run directory
// resumed by M ranks, compared with a straight M-rank run, for 2 -> 1, 1 -> 2 and 2 -> 3.
// 1000 Fashion-MNIST samples, 32 per rank and step (train.elastic_batch = per_rank: the per-rank
// batch is kept, the global batch follows the world), 2 epochs, cosine schedule with warmup.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/fashion_mnist.h"
#include "tests/launch/run_files.h"

namespace {

using dp::testutil::read_file;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";

struct Outcome {
  int exit_code = -1;
  std::string output;
};

Outcome dptrain(const std::string& root, int nproc, const std::string& env = "") {
  const std::string log = root + "/out.log";
  const std::string cmd = env + (env.empty() ? "" : " ") + kBin + " --nproc " + std::to_string(nproc) + " " +
                          DPTRAIN_SOURCE_DIR +
                          "/models/fmnist_mlp.cfg --run-dir " + root + " --name m --log-level info" +
                          dp::test::fashion_mnist_set() + " --set 'model.hidden=[32]' data.train_limit=1000 data.eval_limit=100 train.epochs=2"
                          " train.steps=0 train.batch_size=32 train.schedule=cosine train.warmup_steps=3"
                          " train.lr=0.01 train.threads=1 train.log_every=1 checkpoint.every_steps=5"
                          " checkpoint.keep=0 run.tensorboard=false dist.timeout_s=60 train.elastic_batch=per_rank > " +
                          log + " 2>&1";
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, cmd + "\n" + read_file(log)};
}

struct End {
  int64_t step = -1, epoch = -1, epoch_samples = -1;
  double lr = -1;  // the last train line's
  std::string last_line;
};

End end_of(const std::string& root) {
  End e;
  const std::string latest = read_file(root + "/m/checkpoints/latest");
  const dp::CheckpointMeta m = dp::read_checkpoint_meta(
      dp::SafetensorsFile::open(root + "/m/checkpoints/" + latest.substr(0, latest.size() - 1)));
  e.step = m.step, e.epoch = m.epoch, e.epoch_samples = m.epoch_samples;
  std::ifstream in(root + "/m/metrics.jsonl");
  for (std::string l; std::getline(in, l);) {
    const auto j = nlohmann::json::parse(l);
    if (j.value("split", "") == "train") e.lr = j.at("lr").get<double>(), e.last_line = l;
  }
  return e;
}

std::string root_for(const std::string& tag) {
  auto p = fs::temp_directory_path() / ("dptrain_resume_world_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

struct Case {
  int from, to;
  int kill_after;  // a checkpoint step of the `from` run, inside epoch 1
  int resumed_at;  // where a straight `to` run is after the same samples
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.from << "->" << c.to; }

class ResumeWorld : public ::testing::TestWithParam<Case> {};

TEST_P(ResumeWorld, EndsWhereAStraightRunOfTheNewWorldEnds) {
  SKIP_WITHOUT_FASHION_MNIST();
  const Case c = GetParam();
  const std::string tag = fmt::format("{}to{}", c.from, c.to);
  const std::string straight = root_for(tag + "_straight"), resumed = root_for(tag + "_resumed");
  Outcome s = dptrain(straight, c.to);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  Outcome k = dptrain(resumed, c.from, fmt::format("DPTRAIN_FAULT_KILL_AFTER_STEP={}", c.kill_after));
  ASSERT_EQ(k.exit_code, 128 + SIGKILL) << k.output;
  Outcome r = dptrain(resumed, c.to);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string log = read_file(resumed + "/m/logs/rank-0.log");
  EXPECT_THAT(log, HasSubstr(fmt::format("goes on at step {} of its", c.resumed_at))) << log;

  const End want = end_of(straight), got = end_of(resumed);
  EXPECT_EQ(got.step, want.step);
  EXPECT_EQ(got.epoch, want.epoch);
  EXPECT_EQ(got.epoch_samples, want.epoch_samples);
  EXPECT_EQ(got.lr, want.lr) << "the last step's learning rate";
  EXPECT_EQ(got.epoch, 1) << "both end in epoch 2 (index 1)";
  EXPECT_THAT(log, HasSubstr(fmt::format("epoch 2/2 step {}/{} loss", want.step, want.step)));
  EXPECT_THAT(log, Not(HasSubstr("epoch 3/")));
  fs::remove_all(straight);
  fs::remove_all(resumed);
}

// 1000 samples at 32 per rank: 1 rank 32 steps per epoch, 2 ranks 16, 3 ranks 11 (334 each).
// 2 -> 1: 10 steps x 64 = 640 samples = 20 steps of 1 rank. 1 -> 2: 20 x 32 = 640 = step 10 of 2
// ranks. 2 -> 3: 640 samples leave 360, 120 a rank, 4 steps of 11: step 7.
INSTANTIATE_TEST_SUITE_P(Worlds, ResumeWorld,
                         ::testing::Values(Case{2, 1, 10, 20}, Case{1, 2, 20, 10}, Case{2, 3, 10, 7}),
                         [](const auto& info) { return fmt::format("From{}To{}", info.param.from, info.param.to); });

}  // namespace
