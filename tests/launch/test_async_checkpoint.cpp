// Checkpoints that do not stall the step (issue 32; launch/checkpoint_saver.h): with
// checkpoint.async = true
//   - the files are the synchronous run's, byte for byte (the tensor data, every metadata value
//     but the resolved config's own `async` line);
//   - a kill -9 in the middle of a background write (DPTRAIN_FAULT_KILL_IN_CKPT_WRITE_AT_STEP)
//     leaves the previous checkpoint in place, and the resume ends bitwise where a straight run does;
//   - a background write failing as on a full disk (DPTRAIN_FAULT_CKPT_NO_SPACE_AT_STEP) is
//     reported and training goes on to the end, the previous checkpoint kept;
// and checkpoint.every_s writes time-based checkpoints.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "launch/train_session.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/config.h"
#include "runtime/tunables.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

using dp::testutil::differing;
using dp::testutil::read_file;
using dp::testutil::tensors_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// The resume tests' run (tests/launch/test_resume.cpp): the cnn preset with BN, dropout and
// augmentation on synthetic images, 20 steps of 16, AdamW.
const char* kCfg = R"(
[run]
name = "r"
seed = 5
log_level = "info"
[data]
dataset = "synthetic"
synthetic_shape = [1, 8, 8]
synthetic_train = 200
synthetic_eval = 40
synthetic_classes = 4
mean = [0.5]
std = [0.25]
crop_padding = 1
hflip = true
[model]
preset = "cnn"
num_classes = 4
dropout = 0.25
[train]
steps = 20
batch_size = 16
lr = 0.01
optimizer = "adamw"
threads = 1
log_every = 5
[checkpoint]
every_steps = 4
keep = 0
)";

std::string temp_root(const std::string& tag) { return testutil::temp_root("async_ckpt", tag); }

Config make_cfg(const std::string& root, std::vector<std::string> extra = {}) {
  extra.push_back("run.dir=\"" + root + "\"");
  return parse_config(kCfg, "async.cfg", extra);
}

std::string ckpt(const std::string& root, int64_t step) { return testutil::checkpoint_of_step(root, step); }

// The data area of a safetensors file: everything after its header.
std::string data_area(const std::string& path) {
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return bytes.substr(8 + n);
}

std::string q(const std::string& dir) { return "'" + dir + "'"; }  // as the resolved config quotes run.dir

// Two runs' checkpoints hold the same: every byte of the data area (all tensors), every metadata
// value but the resolved config, and that config once `edits` (from, to) are made to a's (where
// the runs differ on purpose: their run.dir, checkpoint.async). The metadata CRC covers the config.
void expect_same_checkpoint(const std::string& pa, const std::string& pb,
                            const std::vector<std::pair<std::string, std::string>>& edits) {
  SCOPED_TRACE(pa + " vs " + pb);
  const std::string da = data_area(pa), db = data_area(pb);
  ASSERT_GT(da.size(), 100000u);
  EXPECT_TRUE(da == db) << "the tensors' bytes differ";
  auto ma = SafetensorsFile::open(pa).metadata(), mb = SafetensorsFile::open(pb).metadata();
  std::string cfg = ma.at("config");
  for (const auto& [from, to] : edits) {
    const size_t at = cfg.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    cfg.replace(at, from.size(), to);
  }
  EXPECT_EQ(cfg, mb.at("config"));
  for (auto* m : {&ma, &mb}) m->erase("config"), m->erase(kMetadataCrcKey);
  EXPECT_EQ(ma, mb);
}

TEST(AsyncCheckpoint, FilesAreTheSynchronousOnesByteForByte) {
  const std::string a = temp_root("sync"), b = temp_root("async");
  ASSERT_EQ(train(make_cfg(a)).steps, 20);
  ASSERT_EQ(train(make_cfg(b, {"checkpoint.async=true"})).steps, 20);
  for (int64_t step : {4, 8, 12, 16, 20})
    expect_same_checkpoint(ckpt(a, step), ckpt(b, step), {{q(a), q(b)}, {"async = false", "async = true"}});
  EXPECT_THAT(read_file(b + "/r/logs/rank-0.log"), HasSubstr("written in the background"));
  EXPECT_EQ(read_file(a + "/r/checkpoints/latest"), read_file(b + "/r/checkpoints/latest"));
  fs::remove_all(a);
  fs::remove_all(b);
}

// In one run: stopped after step 8 (every_steps = 4), whose checkpoint is written in the background
// from the snapshot while checkpoint.replicas writes the live state of the same step synchronously
// (write_checkpoint, the same metadata): the two files are the same bytes, header and all.
TEST(AsyncCheckpoint, TheBackgroundFileIsTheSynchronousReplicaOfItsStep) {
  const std::string a = temp_root("replica");
  TrainOptions stop;
  stop.stop_after_steps = 8;
  ASSERT_EQ(train(make_cfg(a, {"checkpoint.async=true", "checkpoint.replicas=true"}), stop).steps, 8);
  const std::string replica = read_file(a + "/r/replicas/replica-rank0.safetensors");
  ASSERT_GT(replica.size(), 100000u);
  EXPECT_TRUE(read_file(ckpt(a, 8)) == replica) << "the background file differs from the synchronous one";
  EXPECT_THAT(read_file(a + "/r/logs/rank-0.log"), HasSubstr("checkpoint of step 8: "));
  fs::remove_all(a);
}

using testutil::run_process;

TEST(AsyncCheckpoint, KillDashNineInABackgroundWriteKeepsThePreviousAndResumesBitwise) {
  const std::string dptrain = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
  if (!fs::exists(dptrain)) GTEST_SKIP() << dptrain << " is not built";
  const std::string root = temp_root("kill");
  fs::create_directories(root);
  const std::string cfg = root + "/async.cfg", log = root + "/out.log";
  std::ofstream(cfg) << kCfg;
  auto cmd = [&](const std::string& dir) {
    return std::vector<std::string>{dptrain, cfg, "--set", "run.dir=\"" + dir + "\"", "checkpoint.async=true"};
  };
  int st = run_process(cmd(root + "/a"), {}, log);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(log);

  // Killed by its own writer thread half-way through step 8's file: step 4 is the newest checkpoint.
  st = run_process(cmd(root + "/b"), {"DPTRAIN_FAULT_KILL_IN_CKPT_WRITE_AT_STEP=8"}, log);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << read_file(log);
  const std::string tmp = ckpt(root + "/b", 8) + ".tmp";
  ASSERT_TRUE(fs::exists(tmp)) << "killed in the middle of the write";
  EXPECT_GT(fs::file_size(tmp), 0u);
  EXPECT_LT(fs::file_size(tmp), fs::file_size(ckpt(root + "/a", 8))) << "the file was half-written";
  EXPECT_FALSE(fs::exists(ckpt(root + "/b", 8)));
  EXPECT_EQ(read_file(root + "/b/r/checkpoints/latest"), "step-00000004.safetensors\n");
  expect_same_checkpoint(ckpt(root + "/a", 4), ckpt(root + "/b", 4), {{q(root + "/a"), q(root + "/b")}});

  st = run_process(cmd(root + "/b"), {}, log);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(log);
  EXPECT_THAT(read_file(root + "/b/r/logs/rank-0.log"), HasSubstr("resumed from " + ckpt(root + "/b", 4)));
  EXPECT_FALSE(fs::exists(tmp)) << "the resume cleans the interrupted write's temporary file";
  EXPECT_EQ(differing(tensors_of(ckpt(root + "/a", 20)), tensors_of(ckpt(root + "/b", 20))),
            std::vector<std::string>{});
  expect_same_checkpoint(ckpt(root + "/a", 20), ckpt(root + "/b", 20), {{q(root + "/a"), q(root + "/b")}});
  fs::remove_all(root);
}

// Sets a tunable for this process for the scope (tunables are read once: reload around it).
struct ScopedTunable {
  std::string name;
  ScopedTunable(std::string n, const std::string& v) : name(std::move(n)) {
    ::setenv(name.c_str(), v.c_str(), 1);
    reload_tunables();
  }
  ~ScopedTunable() {
    ::unsetenv(name.c_str());
    reload_tunables();
  }
};

TEST(AsyncCheckpoint, AFullDiskInABackgroundWriteIsReportedAndTrainingGoesOn) {
  const std::string a = temp_root("straight"), b = temp_root("full");
  ASSERT_EQ(train(make_cfg(a, {"checkpoint.async=true"})).steps, 20);
  {
    ScopedTunable fault("DPTRAIN_FAULT_CKPT_NO_SPACE_AT_STEP", "8");
    ASSERT_EQ(train(make_cfg(b, {"checkpoint.async=true"})).steps, 20);
  }
  const std::string log = read_file(b + "/r/logs/rank-0.log");
  EXPECT_THAT(log, HasSubstr("the checkpoint of step 8 could not be written in the background: writing safetensors "
                             "file '" + ckpt(b, 8) + ".tmp' failed: No space left on device"));
  EXPECT_THAT(log, HasSubstr("training goes on, and the newest complete checkpoint is step 4 (" + ckpt(b, 4) + ")"));
  EXPECT_FALSE(fs::exists(ckpt(b, 8)));
  EXPECT_FALSE(fs::exists(ckpt(b, 8) + ".tmp"));
  expect_same_checkpoint(ckpt(a, 4), ckpt(b, 4), {{q(a), q(b)}});  // the previous checkpoint, kept intact
  for (int64_t step : {12, 16, 20}) expect_same_checkpoint(ckpt(a, step), ckpt(b, step), {{q(a), q(b)}});
  EXPECT_EQ(read_file(b + "/r/checkpoints/latest"), "step-00000020.safetensors\n");
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(AsyncCheckpoint, EverySecondsWritesTimeBasedCheckpoints) {
  const std::string a = temp_root("every_s");
  // every_s = 1e-9: due after every step (each takes longer), so each step is checkpointed by
  // the time rule alone (every_steps = 0), decided by rank 0's clock on the stop all-reduce.
  ASSERT_EQ(train(make_cfg(a, {"checkpoint.every_steps=0", "checkpoint.every_s=1e-9", "checkpoint.async=true",
                                   "train.steps=6"})).steps, 6);
  for (int64_t step = 1; step <= 6; ++step) EXPECT_TRUE(fs::exists(ckpt(a, step))) << step;
  const std::string b = temp_root("every_s_off");
  ASSERT_EQ(train(make_cfg(b, {"checkpoint.every_steps=0", "checkpoint.every_s=0", "train.steps=6"})).steps, 6);
  for (int64_t step = 1; step <= 5; ++step) EXPECT_FALSE(fs::exists(ckpt(b, step))) << step;
  EXPECT_TRUE(fs::exists(ckpt(b, 6)));
  // Checkpoints taken by the clock change nothing in training: the last states are equal bitwise.
  EXPECT_EQ(differing(tensors_of(ckpt(a, 6)), tensors_of(ckpt(b, 6))), std::vector<std::string>{});
  fs::remove_all(a);
  fs::remove_all(b);
}

// Two ranks whose steps take 100 ms (DPTRAIN_FAULT_SLOW_STEP_MS) and checkpoint.every_s = 0.35: rank
// 0's clock picks the steps and both ranks save after them. Synchronous saves end in a barrier, so
// a rank saving after another step than the other would meet the other's stop all-reduce there and
// fail the job; with checkpoint.replicas both ranks write theirs at each of those steps.
TEST(AsyncCheckpoint, EverySecondsOnTwoRanksSavesAfterRankZerosSteps) {
  const std::string dptrain = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
  if (!fs::exists(dptrain)) GTEST_SKIP() << dptrain << " is not built";
  const std::string root = temp_root("every_s_2");
  fs::create_directories(root);
  const std::string cfg = root + "/async.cfg", log = root + "/out.log";
  std::ofstream(cfg) << kCfg;
  const auto t0 = std::chrono::steady_clock::now();
  const int st = run_process({dptrain, "--nproc", "2", cfg, "--set", "run.dir=\"" + root + "\"", "train.steps=12",
                              "checkpoint.every_steps=0", "checkpoint.every_s=0.35", "checkpoint.replicas=true"},
                             {"DPTRAIN_FAULT_SLOW_STEP_MS=100"}, log);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(log);
  int timed = 0;
  for (int64_t step = 1; step < 12; ++step) timed += fs::exists(ckpt(root, step)) ? 1 : 0;
  // 12 steps of >= 100 ms (1.2 s at least): a checkpoint every 4th step or so on an idle machine.
  // Each one comes 0.35 s after the last by rank 0's clock, so however slow a loaded machine makes
  // the steps, there are at most elapsed / 0.35 of them (the run's wall time bounds the training's).
  EXPECT_GE(timed, 1);
  EXPECT_LE(timed, static_cast<int>(elapsed / 0.35)) << "in " << elapsed << " s";
  EXPECT_TRUE(fs::exists(ckpt(root, 12)));
  for (int r : {0, 1}) {
    const std::string replica = fmt::format("{}/r/replicas/replica-rank{}.safetensors", root, r);
    EXPECT_EQ(read_checkpoint_meta(SafetensorsFile::open(replica)).step, 12) << replica;
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace dp::launch
