// model.init / model.init_skip in a training run (launch/train_session.cpp init_from_weights):
// a fresh run starts from another run's final weights with a new head of another class count
// (the skipped tensors keep their fresh initialisation, the log lists them); with lr = 0 the
// final parameters show exactly what the run started from. A mismatch without init_skip is one
// error naming the tensors; a resumed run continues from its checkpoint and never reads
// model.init again.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "launch/train_session.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/config.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

using dp::testutil::read_file;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string temp_root(const std::string& tag) { return testutil::temp_root("init", tag); }

// The cnn preset on synthetic 1x8x8 images.
Config cfg_of(const std::string& root, const std::string& name, std::vector<std::string> sets) {
  sets.push_back("run.dir=\"" + root + "\"");
  sets.push_back("run.name=\"" + name + "\"");
  return parse_config(
      "[run]\nlog_level = \"info\"\ntensorboard = false\n[data]\ndataset = \"synthetic\"\n"
      "synthetic_shape = [1, 8, 8]\nsynthetic_train = 64\nsynthetic_eval = 16\nmean = [0.5]\nstd = [0.25]\n"
      "[model]\npreset = \"cnn\"\n[train]\nbatch_size = 16\nthreads = 1\n",
      "init.cfg", sets);
}

// name -> raw bytes of the parameters (the BN running statistics change in any training step).
std::map<std::string, std::string> params_of(const std::string& path) {
  auto all = dp::testutil::tensors_of(path);
  for (auto it = all.begin(); it != all.end();)
    it = it->first.find("running_") != std::string::npos || it->first.find("num_batches") != std::string::npos
             ? all.erase(it)
             : std::next(it);
  return all;
}

TEST(ModelInit, FineTuneFromAnotherRunWithANewHead) {
  const std::string root = temp_root("ft");
  train(cfg_of(root, "a", {"model.num_classes=4", "data.synthetic_classes=4", "train.steps=4", "run.seed=1"}));
  const std::string a = root + "/a/final.safetensors";
  // lr = 0: the final parameters are the ones the run started from.
  const std::vector<std::string> still = {"model.num_classes=3", "data.synthetic_classes=3", "train.steps=1", "train.lr=0", "run.seed=2"};
  auto with_init = still;
  with_init.insert(with_init.end(), {"model.init=\"" + a + "\"", "model.init_skip=[\"fc2.*\"]"});
  train(cfg_of(root, "b", with_init));
  train(cfg_of(root, "fresh", still));
  const auto pa = params_of(a), pb = params_of(root + "/b/final.safetensors"),
             pf = params_of(root + "/fresh/final.safetensors");
  ASSERT_EQ(pb.size(), 10u);
  for (const auto& [name, bytes] : pb) {
    if (name.rfind("fc2.", 0) == 0) EXPECT_EQ(bytes, pf.at(name)) << name << " keeps its fresh initialisation";
    else EXPECT_EQ(bytes, pa.at(name)) << name << " comes from model.init";
  }
  const std::string log = read_file(root + "/b/logs/rank-0.log");
  EXPECT_THAT(log, HasSubstr("model.init: 14 of the model's 16 tensors from " + a + " (dptrain final weights)"));
  EXPECT_THAT(log, HasSubstr("model.init_skip: left at their fresh initialisation: fc2.weight, fc2.bias"));
  fs::remove_all(root);
}

TEST(ModelInit, MismatchIsOneErrorAndAResumeNeverReadsInitAgain) {
  const std::string root = temp_root("err");
  train(cfg_of(root, "a", {"model.num_classes=4", "data.synthetic_classes=4", "train.steps=2"}));
  const std::string a = root + "/a/final.safetensors";
  try {
    train(cfg_of(root, "b", {"model.num_classes=3", "data.synthetic_classes=3", "train.steps=2", "model.init=\"" + a + "\""}));
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "weights '" + a +
                  "' (dptrain final weights) do not fit the model: 2 problems: 'fc2.weight': the model has f32[3, "
                  "128], the file f32[4, 128]; 'fc2.bias': the model has f32[3], the file f32[4]. Leave tensors at "
                  "their fresh initialisation with model.init_skip (glob patterns, e.g. [\"fc.*\"] for a new "
                  "classifier), or check that the cfg builds the model these weights are of");
  }
  const Config c = cfg_of(root, "c", {"model.num_classes=3", "data.synthetic_classes=3", "train.steps=2", "model.init=\"" + a + "\"",
                                      "model.init_skip=[\"fc2.*\"]"});
  TrainOptions stop;
  stop.stop_after_steps = 1;
  train(c, stop);
  fs::remove(a);  // the resumed run continues from its own checkpoint
  TrainResult r = train(c);
  EXPECT_EQ(r.resumed_from_step, 1);
  EXPECT_EQ(r.steps, 2);
  fs::remove_all(root);
}

}  // namespace
}  // namespace dp::launch
