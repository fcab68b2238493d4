// Resume from checkpoints (launch/train_session.cpp + runtime/checkpoint/*.h), single process:
//   - K steps straight == K/2 steps, stop, resume, K/2 steps: every tensor of the final
//     checkpoint (weights, BN statistics, optimizer state) bitwise equal, for SGD with
//     momentum and AdamW, a model with BN and dropout, augmentation on, stopped mid-epoch;
//   - the same after `kill -9` of the dptrain process (DPTRAIN_FAULT_KILL_AFTER_STEP);
//   - a corrupted newest checkpoint: resume uses the previous one, with a warning, and still
//     ends bitwise equal; a checkpoint of another model is an error naming the tensor;
//   - keep-K and `latest` in a real run; --reset (dptrain's flag) and checkpoint.resume = false
//     start over; a finished run resumed does nothing.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "launch/train_session.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/config.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

using dp::testutil::differing;
using dp::testutil::read_file;
using dp::testutil::tensors_of;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Synthetic 1x8x8 images, 200 training samples, batch 16 (13 steps per epoch, the last one of
// 8 samples; 12 with drop_last), the cnn preset (conv-BN-ReLU-pool x2, linear, dropout,
// linear), random crops and flips: every source of state and randomness the trainer has.
const char* kCfg = R"(
[run]
name = "r"
seed = 5
log_level = "warn"
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
schedule = "cosine"
warmup_steps = 3
threads = 1
log_every = 5
)";

std::string temp_root(const std::string& tag) { return testutil::temp_root("resume", tag); }

Config make_cfg(const std::string& root, std::vector<std::string> extra = {}) {
  extra.push_back("run.dir=\"" + root + "\"");
  return parse_config(kCfg, "resume.cfg", extra);
}

std::string ckpt(const std::string& root, int64_t step) { return testutil::checkpoint_of_step(root, step); }

// Flips one byte in the middle of `tensor`'s data.
void corrupt(const std::string& path, const std::string& tensor) {
  SafetensorsFile f = SafetensorsFile::open(path);
  const auto& info = f.info(tensor);
  uint64_t header_len = 0;
  std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
  io.read(reinterpret_cast<char*>(&header_len), 8);
  const auto at = static_cast<std::streamoff>(8 + header_len + (info.begin + info.end) / 2);
  char c = 0;
  io.seekg(at);
  io.read(&c, 1);
  c = static_cast<char>(c ^ 0x01);
  io.seekp(at);
  io.write(&c, 1);
}

struct Variant {
  const char* name;
  std::vector<std::string> sets;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class ResumeBitwise : public ::testing::TestWithParam<Variant> {};

TEST_P(ResumeBitwise, HalfStopResumeEqualsStraight) {
  const std::string a = temp_root(std::string("straight_") + GetParam().name);
  const std::string b = temp_root(std::string("halves_") + GetParam().name);
  TrainResult straight = train(make_cfg(a, GetParam().sets));
  ASSERT_EQ(straight.steps, 20);
  EXPECT_EQ(straight.resumed_from_step, -1);

  TrainOptions stop;
  stop.stop_after_steps = 10;
  TrainResult first = train(make_cfg(b, GetParam().sets), stop);
  ASSERT_EQ(first.steps, 10);
  EXPECT_FALSE(fs::exists(ckpt(b, 20)));
  {
    // Stopped in the middle of the first epoch: 10 batches of 16 consumed.
    CheckpointMeta m = read_checkpoint_meta(SafetensorsFile::open(ckpt(b, 10)));
    EXPECT_EQ(m.step, 10);
    EXPECT_EQ(m.epoch, 0);
    EXPECT_EQ(m.epoch_samples, 160);
    EXPECT_EQ(m.optimizer_steps, 10);
  }
  TrainResult second = train(make_cfg(b, GetParam().sets));
  EXPECT_EQ(second.resumed_from_step, 10);
  EXPECT_EQ(second.resumed_from, ckpt(b, 10));
  ASSERT_EQ(second.steps, 20);

  auto want = tensors_of(ckpt(a, 20)), got = tensors_of(ckpt(b, 20));
  ASSERT_GT(want.size(), 20u);
  EXPECT_TRUE(want.count("optim.fc1.weight." + std::string(GetParam().name == std::string("adamw") ? "exp_avg_sq"
                                                                                                   : "momentum_buffer")))
      << "optimizer state is in the checkpoint";
  EXPECT_EQ(differing(want, got), std::vector<std::string>{}) << "tensors differ after stop + resume";
  EXPECT_EQ(tensors_of(a + "/r/final.safetensors"), tensors_of(b + "/r/final.safetensors"));
  CheckpointMeta ma = read_checkpoint_meta(SafetensorsFile::open(ckpt(a, 20)));
  CheckpointMeta mb = read_checkpoint_meta(SafetensorsFile::open(ckpt(b, 20)));
  EXPECT_EQ(ma.epoch, mb.epoch);
  EXPECT_EQ(ma.epoch_samples, mb.epoch_samples);
  EXPECT_EQ(mb.optimizer_steps, 20);
  EXPECT_EQ(second.final_eval.loss, straight.final_eval.loss);  // same weights, same eval
  fs::remove_all(a);
  fs::remove_all(b);
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, ResumeBitwise,
    ::testing::Values(Variant{"sgd", {"train.optimizer=\"sgd\"", "train.momentum=0.9", "train.nesterov=true",
                                      "train.weight_decay=0.0005", "data.drop_last=true"}},
                      Variant{"adamw", {"train.optimizer=\"adamw\"", "train.weight_decay=0.01"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Resume, CorruptNewestCheckpointFallsBackToThePreviousWithAWarning) {
  const std::string a = temp_root("ref"), b = temp_root("corrupt");
  train(make_cfg(a));
  TrainOptions stop;
  stop.stop_after_steps = 12;
  train(make_cfg(b, {"checkpoint.every_steps=6"}), stop);
  ASSERT_TRUE(fs::exists(ckpt(b, 6)));
  ASSERT_TRUE(fs::exists(ckpt(b, 12)));
  corrupt(ckpt(b, 12), "conv2.weight");

  TrainResult r = train(make_cfg(b, {"checkpoint.every_steps=6"}));
  EXPECT_EQ(r.resumed_from_step, 6);
  EXPECT_EQ(r.steps, 20);
  const std::string log = read_file(b + "/r/logs/rank-0.log");
  EXPECT_THAT(log, HasSubstr("cannot resume from " + ckpt(b, 12) + ": checkpoint '" + ckpt(b, 12) +
                             "' is corrupt: tensor 'conv2.weight' fails its CRC-32C check"));
  EXPECT_THAT(log, HasSubstr("resuming from the previous good checkpoint " + ckpt(b, 6) +
                             " (step 6) because 1 newer one(s) failed their checks"));
  // Steps 7..12 were redone: still bitwise the straight run.
  EXPECT_EQ(differing(tensors_of(ckpt(a, 20)), tensors_of(ckpt(b, 20))), std::vector<std::string>{});
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Resume, CheckpointOfAnotherModelIsAnErrorNamingTheTensor) {
  const std::string root = temp_root("other");
  train(make_cfg(root));
  try {
    train(make_cfg(root, {"model.num_classes=5"}));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("none of the 1 checkpoints in '" + root + "/r/checkpoints' can be resumed"));
    EXPECT_THAT(e.what(), HasSubstr("checkpoint '" + ckpt(root, 20) +
                                    "' does not match the model: tensor 'fc2.weight' is f32[4, 128] in the checkpoint "
                                    "but f32[5, 128] in the model"));
    EXPECT_THAT(e.what(), HasSubstr("--reset"));
  }
  // --reset starts over: the old checkpoint is deleted, the new model trains from step 0.
  TrainOptions reset;
  reset.reset = true;
  TrainResult r = train(make_cfg(root, {"model.num_classes=5"}), reset);
  EXPECT_EQ(r.resumed_from_step, -1);
  EXPECT_EQ(r.steps, 20);
  EXPECT_EQ(SafetensorsFile::open(ckpt(root, 20)).info("fc2.weight").shape, (Shape{5, 128}));
  fs::remove_all(root);
}

TEST(Resume, KeepLatestFinishedRunAndResumeFalse) {
  const std::string root = temp_root("keep");
  Config cfg = make_cfg(root, {"checkpoint.every_steps=4", "checkpoint.keep=2", "checkpoint.replicas=true"});
  TrainResult r = train(cfg);
  EXPECT_EQ(r.steps, 20);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(root + "/r/checkpoints")) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"latest", "step-00000016.safetensors", "step-00000020.safetensors"}));
  EXPECT_EQ(read_file(root + "/r/checkpoints/latest"), "step-00000020.safetensors\n");
  // The replica is the same checkpoint, for tools/diffckpt --all.
  EXPECT_EQ(tensors_of(root + "/r/replicas/replica-rank0.safetensors"), tensors_of(ckpt(root, 20)));

  // Run again: already complete, nothing trained, nothing rewritten.
  const auto mtime = fs::last_write_time(ckpt(root, 20));
  TrainResult again = train(cfg);
  EXPECT_EQ(again.resumed_from_step, 20);
  EXPECT_EQ(again.steps, 20);
  EXPECT_EQ(again.final_eval.loss, r.final_eval.loss);
  EXPECT_EQ(fs::last_write_time(ckpt(root, 20)), mtime);

  // checkpoint.resume = false: a fresh start that replaces the old checkpoints.
  Config fresh = cfg;
  fresh.checkpoint.resume = false;
  fresh.train.steps = 6;
  TrainResult f = train(fresh);
  EXPECT_EQ(f.resumed_from_step, -1);
  EXPECT_EQ(f.steps, 6);
  EXPECT_FALSE(fs::exists(ckpt(root, 20)));
  EXPECT_TRUE(fs::exists(ckpt(root, 6)));
  EXPECT_EQ(read_file(root + "/r/checkpoints/latest"), "step-00000006.safetensors\n");
  fs::remove_all(root);
}

// A run stopped right after its last step (a signal then, or a preemption) has its last
// checkpoint but no final weights: resuming the finished run writes them, equal to a straight run's.
TEST(Resume, StoppedAfterTheLastStepGetsItsFinalWeightsOnResume) {
  const std::string straight = temp_root("final_straight"), stopped = temp_root("final_stopped");
  train(make_cfg(straight));
  TrainOptions stop;
  stop.stop_after_steps = 20;
  train(make_cfg(stopped), stop);
  ASSERT_TRUE(fs::exists(ckpt(stopped, 20)));
  ASSERT_FALSE(fs::exists(stopped + "/r/final.safetensors"));
  TrainResult again = train(make_cfg(stopped));
  EXPECT_EQ(again.resumed_from_step, 20);
  EXPECT_EQ(tensors_of(stopped + "/r/final.safetensors"), tensors_of(straight + "/r/final.safetensors"));
  fs::remove_all(straight);
  fs::remove_all(stopped);
}

using testutil::run_process;

TEST(Resume, KillDashNineThenResumeEqualsStraight) {
  const std::string dptrain = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
  if (!fs::exists(dptrain)) GTEST_SKIP() << dptrain << " is not built";
  const std::string root = temp_root("kill");
  fs::create_directories(root);
  const std::string cfg = root + "/resume.cfg", log = root + "/out.log";
  std::ofstream(cfg) << kCfg;
  auto cmd = [&](const std::string& dir) {
    return std::vector<std::string>{dptrain,    cfg, "--set", "run.dir=\"" + dir + "\"", "checkpoint.every_steps=4",
                                    "--log-level", "info"};
  };
  int st = run_process(cmd(root + "/a"), {}, log);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(log);

  // Killed after step 11: the newest checkpoint is step 8; steps 9..11 are lost and redone.
  st = run_process(cmd(root + "/b"), {"DPTRAIN_FAULT_KILL_AFTER_STEP=11"}, log);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << read_file(log);
  EXPECT_EQ(read_file(root + "/b/r/checkpoints/latest"), "step-00000008.safetensors\n");
  EXPECT_FALSE(fs::exists(root + "/b/r/final.safetensors"));
  st = run_process(cmd(root + "/b"), {}, log);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(log);
  EXPECT_THAT(read_file(root + "/b/r/logs/rank-0.log"), HasSubstr("resumed from " + ckpt(root + "/b", 8)));

  EXPECT_EQ(differing(tensors_of(ckpt(root + "/a", 20)), tensors_of(ckpt(root + "/b", 20))),
            std::vector<std::string>{});

  // --reset: the finished run starts over from step 0 (and ends where it ended before).
  auto reset = cmd(root + "/b");
  reset.push_back("--reset");
  st = run_process(reset, {}, log);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(log);
  const std::string blog = read_file(root + "/b/r/logs/rank-0.log");
  EXPECT_THAT(blog, HasSubstr("--reset: starting over; deleted 3 checkpoint(s) of an earlier run in " + root +
                              "/b/r/checkpoints"));
  EXPECT_EQ(blog.find("resumed from", blog.find("--reset: starting over")), std::string::npos);
  EXPECT_EQ(differing(tensors_of(ckpt(root + "/a", 20)), tensors_of(ckpt(root + "/b", 20))),
            std::vector<std::string>{});
  fs::remove_all(root);
}

}  // namespace
}  // namespace dp::launch
