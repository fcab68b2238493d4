// A loss that is not finite stops the run, through the real binary, and no checkpoint of that step
// is written by any rank. The loss is read after the step's backward (TrainSession::
// compute_gradients: on a GPU that is the step's one host wait), so on several ranks the others
// may already have updated with the bad rank's gradients; a save begins with a barrier of every
// rank, so nothing of that step reaches the disk. The bad input is real data: an array data set
// (npy) with one sample of the largest finite values, which the sampler (no shuffle) gives to a
// known rank in step 3, where the linear layer's sums overflow (a NaN sample is refused when the
// arrays are opened, runtime/data/npy.h). On the CPU here; on a GPU (NonFiniteLossGpu, skipped
// without one) in the runbook's call.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "runtime/checkpoint/safetensors.h"
#include "tests/gpu_test.h"
#include "tests/launch/run_files.h"
#include "tests/npy_file.h"

namespace {

namespace fs = std::filesystem;
using dp::testutil::checkpoint_of_step;
using dp::testutil::read_file;
using dp::testutil::run_process;
using dp::testutil::temp_root;

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
constexpr int kSamples = 64, kFeatures = 4;

// train_x/val_x (kSamples, kFeatures) f32 and train_y/val_y (kSamples) i64 in `dir`; every
// feature of training sample `big_at` is the largest finite float. And w.safetensors, the linear
// layer's weights all 1 and its bias 0 (model.init): two SGD steps later they are still near 1, so
// that sample's logits are sums of terms near FLT_MAX, both +inf, and the loss inf - inf = NaN.
void write_arrays(const std::string& dir, int big_at) {
  fs::create_directories(dir);
  std::vector<float> x(kSamples * kFeatures);
  std::vector<int64_t> y(kSamples);
  for (int i = 0; i < kSamples; ++i) {
    for (int j = 0; j < kFeatures; ++j) x[i * kFeatures + j] = static_cast<float>((i * 7 + j * 3) % 11) / 11.0f;
    y[i] = i % 2;
  }
  const std::string xh = "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 4), }";
  const std::string yh = "{'descr': '<i8', 'fortran_order': False, 'shape': (64,), }";
  dp::test::write_npy(dir + "/val_x.npy", xh, x.data(), x.size() * sizeof(float));
  dp::test::write_npy(dir + "/val_y.npy", yh, y.data(), y.size() * sizeof(int64_t));
  for (int j = 0; j < kFeatures; ++j) x[big_at * kFeatures + j] = std::numeric_limits<float>::max();
  dp::test::write_npy(dir + "/train_x.npy", xh, x.data(), x.size() * sizeof(float));
  dp::test::write_npy(dir + "/train_y.npy", yh, y.data(), y.size() * sizeof(int64_t));
  dp::Tensor w = dp::Tensor::zeros({2, kFeatures});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 1.0f;
  dp::write_safetensors(dir + "/w.safetensors", {{"fc1.weight", w}, {"fc1.bias", dp::Tensor::zeros({2})}});
}

// A linear classifier on those arrays from those weights, batches of 4 in order, 6 steps of SGD, a
// checkpoint after every step;
// `ranks` processes on `device` (train.device). Returns the wait status; the output is in <root>.log.
int train(const std::string& root, int ranks, const std::string& device) {
  const std::string cfg = root + "/m.cfg";
  std::ofstream(cfg) << "[run]\nname = \"r\"\ntensorboard = false\n"
                     << "[data]\ndataset = \"npy\"\npath = \"" << root << "/data\"\nshuffle = false\n"
                     << "[model]\npreset = \"mlp\"\nhidden = []\ninit = \"" << root << "/data/w.safetensors\"\n"
                     << "[train]\nsteps = 6\nbatch_size = 4\noptimizer = \"sgd\"\nlr = 0.1\nthreads = 1\n"
                     << "device = \"" << device << "\"\n"
                     << "[checkpoint]\nevery_steps = 1\n";
  std::vector<std::string> argv{kBin};
  if (ranks > 1) argv.insert(argv.end(), {"--nproc", std::to_string(ranks)});
  argv.insert(argv.end(), {cfg, "--run-dir", root});
  return run_process(argv, {}, root + ".log");
}

bool all_finite(const std::string& path) {
  dp::SafetensorsFile f = dp::SafetensorsFile::open(path);
  for (const auto& n : f.names()) {
    const dp::Tensor t = f.get(n);
    if (t.dtype() != dp::DType::F32) continue;
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.data<float>()[i])) return false;
  }
  return true;
}

// ranks processes, the overflowing sample where `bad_rank` reads it in step 3: the run fails naming that
// rank and step; steps 1 and 2 are on disk with finite weights, nothing of step 3 or later is.
void expect_stops_at_step_3(const std::string& tag, int ranks, int bad_rank, int big_at,
                            const std::string& device = "cpu") {
  const std::string root = temp_root("nonfinite", tag + device);
  write_arrays(root + "/data", big_at);
  const int status = train(root, ranks, device);
  const std::string log = read_file(root + ".log");
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_NE(WEXITSTATUS(status), 0) << log;
  const std::string who = "[rank " + std::to_string(bad_rank) + "/" + std::to_string(ranks) + " on ";
  const size_t at = log.find("the loss became NaN in step 3 " + who);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_NE(log.find("]; lower train.lr or check the data", at), std::string::npos) << log;
  for (int step = 1; step <= 2; ++step) {
    ASSERT_TRUE(fs::exists(checkpoint_of_step(root, step))) << step << "\n" << log;
    EXPECT_TRUE(all_finite(checkpoint_of_step(root, step))) << step;
  }
  for (int step = 3; step <= 6; ++step) EXPECT_FALSE(fs::exists(checkpoint_of_step(root, step))) << step << "\n" << log;
  EXPECT_FALSE(fs::exists(root + "/r/final.safetensors")) << log;
  fs::remove_all(root);
  fs::remove(root + ".log");
}

}  // namespace

// One process: samples 8..11 are step 3's.
TEST(NonFiniteLoss, OneRankStopsBeforeTheStepIsSaved) { expect_stops_at_step_3("one", 1, 0, 9); }

// Two ranks, no shuffle: rank r takes samples r, r + 2, ...; rank 1's step 3 begins at sample 17.
// Rank 0's own loss is finite: it has averaged rank 1's non-finite gradients and stepped, and must not
// write that step's checkpoint.
TEST(NonFiniteLoss, TwoRanksStopBeforeAnyRankSavesTheStep) { expect_stops_at_step_3("two", 2, 1, 17); }

// The same on a GPU, where the losses are read after backward in one wait (GpuRun::read_step);
// the two ranks share the GPU over the ring backend.
DP_GPU_TEST(NonFiniteLossGpu, OneRankStopsBeforeTheStepIsSaved) { expect_stops_at_step_3("one", 1, 0, 9, "cuda"); }
DP_GPU_TEST(NonFiniteLossGpu, TwoRanksStopBeforeAnyRankSavesTheStep) {
  expect_stops_at_step_3("two", 2, 1, 17, "cuda");
}
