// The GPU running out of memory in a step, through the real binary on the CPU path
// (DPTRAIN_FAULT_DEVICE_OOM_AT_STEP raises the error a failed device allocation raises, from the
// step's first layer): dptrain exits with status 4 and one error naming the layer, the bytes asked
// and free, the keys to lower and the checkpoint a rerun resumes from; that checkpoint is intact
// (format, step, every CRC) and nothing newer was written; the same command run again resumes
// from it and ends with the weights of a run that never failed.
// Fashion-MNIST CNN, 640 samples, batch 64: 10 steps, a checkpoint every 4, the fault at step 7.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/launch/run_files.h"

namespace {

using dp::testutil::differing;
using dp::testutil::read_file;
using dp::testutil::tensors_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
const std::string kData = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

struct Outcome {
  int exit_code = -1;
  std::string out, err, cmd;
};

Outcome dptrain(const std::string& root, const std::string& env = "") {
  const std::string cmd = env + (env.empty() ? "" : " ") + kBin + " " + DPTRAIN_SOURCE_DIR +
                          "/models/fmnist_cnn.cfg --run-dir " + root + " --name oom --log-level info --set "
                          "data.train_limit=640 data.eval_limit=100 train.epochs=1 train.batch_size=64 "
                          "train.warmup_steps=2 train.threads=1 train.log_every=1 checkpoint.every_steps=4 "
                          "checkpoint.keep=0 run.tensorboard=false";
  const int st = std::system((cmd + " > " + root + "/stdout 2> " + root + "/stderr").c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, read_file(root + "/stdout"), read_file(root + "/stderr"), cmd};
}

std::string root_for(const std::string& tag) {
  auto p = fs::temp_directory_path() / ("dptrain_device_oom_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// The lines of `text` that contain `what`.
std::vector<std::string> lines_with(const std::string& text, const std::string& what) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.find(what) != std::string::npos) out.push_back(l);
  return out;
}

TEST(DeviceOom, ExitsWithStatus4NamesLayerBytesAndKeysKeepsTheCheckpointAndARerunResumes) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const std::string root = root_for("fault"), straight = root_for("straight");
  const std::string ckpts = root + "/oom/checkpoints", ckpt4 = ckpts + "/step-00000004.safetensors";

  const Outcome f = dptrain(root, "DPTRAIN_FAULT_DEVICE_OOM_AT_STEP=7");
  ASSERT_EQ(f.exit_code, 4) << f.cmd << "\n" << f.err;
  // One error, on the console and in the rank's log, and nothing else went wrong on the way out.
  const std::vector<std::string> errs = lines_with(f.err, "dptrain: error:");
  ASSERT_EQ(errs.size(), 1u) << f.err;
  const std::string expect_head = "dptrain: error: device out of memory on cpu [" + dp::identity_string() +
                                  "] in layer 'conv1' (conv2d), forward: 6.1 MiB (6422528 bytes) asked for a [64, 32, "
                                  "28, 28] f32 tensor, its output's size, ";
  EXPECT_EQ(errs[0].substr(0, expect_head.size()), expect_head) << errs[0];
  EXPECT_TRUE(std::regex_search(errs[0], std::regex(R"(, [0-9.]+ [KMGT]iB \([0-9]+ bytes\) free of [0-9.]+ [KMGT]iB )"
                                                    R"(\([0-9]+ bytes\) \(DPTRAIN_FAULT_DEVICE_OOM_AT_STEP=7, an )"
                                                    R"(injected fault\); )")))
      << errs[0];
  EXPECT_THAT(errs[0], HasSubstr("; lower train.batch_size (activations grow with it) or train.workspace_mb (the "
                                 "cuDNN/cuBLASLt scratch); the checkpoint of step 4 (" + ckpt4 +
                                 ") is intact: run the same command again to resume from it"));
  const std::string log = read_file(root + "/oom/logs/rank-0.log");
  EXPECT_EQ(lines_with(log, "device out of memory").size(), 1u) << log;
  EXPECT_EQ(lines_with(log, "] error: ").size(), 1u) << log;  // the one error line, no cascade

  // The checkpoint before the fault is whole, the newest, and nothing after it was written.
  EXPECT_EQ(read_file(ckpts + "/latest"), "step-00000004.safetensors\n");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(ckpts)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"latest", "step-00000004.safetensors"}));
  EXPECT_FALSE(fs::exists(root + "/oom/final.safetensors"));
  {
    const dp::SafetensorsFile file = dp::SafetensorsFile::open(ckpt4);
    EXPECT_EQ(dp::read_checkpoint_meta(file).step, 4);
    const auto crcs = dp::check_crcs(file);
    EXPECT_FALSE(crcs.empty());
    for (const auto& c : crcs) EXPECT_TRUE(c.ok()) << c.name;
  }
  const int info = std::system((std::string(DPTRAIN_BINARY_DIR) + "/ckptinfo " + ckpts + " > /dev/null").c_str());
  EXPECT_TRUE(WIFEXITED(info) && WEXITSTATUS(info) == 0) << "ckptinfo found a bad CRC";

  // The same command again: resumes from step 4 and finishes, as a run that never failed.
  const Outcome r = dptrain(root);
  ASSERT_EQ(r.exit_code, 0) << r.cmd << "\n" << r.err;
  EXPECT_THAT(read_file(root + "/oom/logs/rank-0.log"), HasSubstr("resumed from " + ckpt4 + ": step 4"));
  const Outcome s = dptrain(straight);
  ASSERT_EQ(s.exit_code, 0) << s.cmd << "\n" << s.err;
  EXPECT_EQ(differing(tensors_of(ckpts + "/step-00000010.safetensors"),
                      tensors_of(straight + "/oom/checkpoints/step-00000010.safetensors")),
            std::vector<std::string>{});
  fs::remove_all(root);
  fs::remove_all(straight);
}

}  // namespace
