// checkpoint.async on the GPU (issue 32; launch/checkpoint_saver.h, the snapshot's pinned block and
// its copies on the compute stream: runtime/checkpoint/checkpoint_snapshot_cuda.cpp): stopped
// after step 8 of a run that checkpoints every 4 steps in the background, the step-8 file is byte
// for byte the replica that checkpoint.replicas wrote synchronously from the device state of the
// same step. One run, so the GPU's choice of algorithms cannot make the two differ. Skips without
// a GPU.
#include <gtest/gtest.h>

#include <filesystem>

#include "launch/train_session.h"
#include "runtime/config.h"
#include "tests/gpu_test.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

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
[model]
preset = "cnn"
num_classes = 4
[train]
steps = 20
batch_size = 16
lr = 0.01
optimizer = "adamw"
device = "cuda"
[checkpoint]
every_steps = 4
keep = 0
async = true
replicas = true
)";

DP_GPU_TEST(AsyncCheckpointGpu, TheBackgroundFileIsTheSynchronousReplicaOfItsStep) {
  const auto root = std::filesystem::temp_directory_path() / ("dptrain_cuda_async_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  TrainOptions stop;
  stop.stop_after_steps = 8;
  ASSERT_EQ(train(parse_config(kCfg, "async.cfg", {"run.dir=\"" + root.string() + "\""}), stop).steps, 8);
  const std::string replica = testutil::read_file((root / "r/replicas/replica-rank0.safetensors").string());
  ASSERT_GT(replica.size(), 100000u);
  EXPECT_TRUE(testutil::read_file((root / "r/checkpoints/step-00000008.safetensors").string()) == replica)
      << "the background file (pinned snapshot, copied on the compute stream) differs from the synchronous one";
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace dp::launch
