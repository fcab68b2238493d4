// One convention for epochs and counts in everything printed: epochs are 1-based in the log, the
// metrics and ckptinfo (the checkpoint stores the 0-based index, and ckptinfo says so); an
// evaluation at the end of a run that stops inside an epoch says where it is, not "after epoch";
// one step is "1 step".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "launch/train_session.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/config.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

using dp::testutil::read_file;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

std::string temp_root(const std::string& tag) { return testutil::temp_root("epochs", tag); }

// Synthetic 1x6x6 images, an MLP, batch 16; `samples` training samples.
Config cfg_of(const std::string& root, int64_t samples, std::vector<std::string> sets) {
  sets.push_back("run.dir=\"" + root + "\"");
  sets.push_back("data.synthetic_train=" + std::to_string(samples));
  return parse_config(
      "[run]\nname = \"e\"\nlog_level = \"info\"\ntensorboard = false\n[data]\ndataset = \"synthetic\"\n"
      "synthetic_shape = [1, 6, 6]\nsynthetic_eval = 32\nmean = [0.5]\nstd = [0.25]\n[model]\npreset = \"mlp\"\n"
      "hidden = [16]\n[train]\nbatch_size = 16\nlog_every = 1\nthreads = 1\n",
      "e.cfg", sets);
}

std::string capture(const std::string& cmd) {
  std::string out;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  ::pclose(p);
  return out;
}

// 200 samples at 16 per step: 13 steps per epoch. A run of 3 steps evaluates at its end, inside
// epoch 1.
TEST(EpochNumbering, AnEvaluationInsideAnEpochSaysWhere) {
  const std::string root = temp_root("inside");
  train(cfg_of(root, 200, {"train.steps=3"}));
  const std::string log = read_file(root + "/e/logs/rank-0.log");
  EXPECT_THAT(log, HasSubstr("eval at step 3 (3 of 13 steps into epoch 1): loss"));
  EXPECT_THAT(log, Not(HasSubstr("after epoch")));
  EXPECT_THAT(log, HasSubstr("training: 3 steps (1 epoch of 13 steps, batch 16)"));
  fs::remove_all(root);
}

// 16 samples: one step per epoch, two epochs. The log, metrics.jsonl and ckptinfo agree that the
// last step is in epoch 2; the file stores index 1.
TEST(EpochNumbering, LogMetricsAndCkptinfoCountEpochsFromOne) {
  const std::string root = temp_root("one");
  train(cfg_of(root, 16, {"train.epochs=2"}));
  const std::string log = read_file(root + "/e/logs/rank-0.log");
  EXPECT_THAT(log, HasSubstr("training: 2 steps (2 epochs of 1 step, batch 16)"));
  EXPECT_THAT(log, HasSubstr("epoch 2/2 step 2/2 loss"));
  EXPECT_THAT(log, HasSubstr("eval after epoch 1 (step 1)"));
  EXPECT_THAT(log, HasSubstr("eval after epoch 2 (step 2)"));
  EXPECT_THAT(log, HasSubstr("done: 2 steps in"));
  const std::string metrics = read_file(root + "/e/metrics.jsonl");
  EXPECT_THAT(metrics, HasSubstr("\"epoch\":2,\"loss\""));
  const std::string ckpt = root + "/e/checkpoints/step-00000002.safetensors";
  EXPECT_EQ(read_checkpoint_meta(SafetensorsFile::open(ckpt)).epoch, 1) << "stored 0-based";
  const std::string info = capture(std::string(DPTRAIN_BINARY_DIR) + "/ckptinfo " + ckpt);
  EXPECT_THAT(info, HasSubstr("  epoch: 1 (stored 0-based: epoch 2 in the log)\n")) << info;
  fs::remove_all(root);

  train(cfg_of(root, 16, {"train.steps=1"}));
  EXPECT_THAT(read_file(root + "/e/logs/rank-0.log"), HasSubstr("done: 1 step in"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace dp::launch
