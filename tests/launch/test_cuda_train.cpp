// Training on the GPU against training on the CPU: the same cfg, seed and data give nearly the
// same weights in fp32 as both CPU implementations (the arithmetic differs only in rounding order:
// tests/launch/fp32_agreement.h), Fashion-MNIST reaches the CPU run's accuracy in fp32, bf16 and fp16,
// and fp16 reports its loss scale and peak device memory in metrics.jsonl; and bf16 training on
// batches made on the GPU (data.synthetic_device = "cuda") with the fused optimizer writing the
// 16-bit weights learns as the CPU does (FusedCopyTrainGpu). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "launch/train_session.h"
#include "runtime/config.h"
#include "runtime/device_memory.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/fashion_mnist.h"
#include "tests/gpu_test.h"
#include "tests/launch/fp32_agreement.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

std::string temp_root(const std::string& tag) { return testutil::temp_root("cuda_train", tag); }

// The GPU's f32 weights after ten steps against both CPU implementations' (oneDNN and the
// reference kernels), within the rounding drift two correct f32 implementations reach
// (tests/launch/fp32_agreement.h: the bound, how it was measured, and its CI check).
DP_GPU_TEST(CudaTrainGpu, Fp32GpuWeightsMatchTheCpuRun) {
  const std::string g = fp32_agreement_root("gpu"), c1 = fp32_agreement_root("onednn"),
                    c2 = fp32_agreement_root("reference");
  const std::string gpu = fp32_agreement_run(g, "cuda", "onednn");
  const double vs_onednn = weights_error(gpu, fp32_agreement_run(c1, "cpu", "onednn"));
  const double vs_reference = weights_error(gpu, fp32_agreement_run(c2, "cpu", "reference"));
  for (const auto& r : {g, c1, c2}) std::filesystem::remove_all(r);
  RecordProperty("vs_onednn", std::to_string(vs_onednn));
  RecordProperty("vs_reference", std::to_string(vs_reference));
  EXPECT_LT(vs_onednn, kFp32WeightsBound) << "GPU fp32 weights after 10 steps against the CPU's (oneDNN)";
  EXPECT_LT(vs_reference, kFp32WeightsBound) << "GPU fp32 weights after 10 steps against the CPU's (reference)";
}

// The train lines of metrics.jsonl (step -> {loss, accuracy}) of 8 steps of the fmnist CNN in f32
// on synthetic data, 3 micro-batches a step, a line every step.
std::map<int64_t, std::pair<double, double>> step_lines(const std::string& device) {
  const std::string root = temp_root("lines" + device);
  Config cfg = load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg",
                           {"run.dir=\"" + root + "\"", "data.dataset=\"synthetic\"",
                            "data.synthetic_shape=[1, 28, 28]", "data.synthetic_train=1536", "data.synthetic_eval=64",
                            "train.steps=8", "train.batch_size=64", "train.accum_steps=3", "train.log_every=1",
                            "train.warmup_steps=0", "train.device=\"" + device + "\"", "run.log_level=\"warn\"",
                            "run.tensorboard=false", "checkpoint.final=false"});
  train(cfg);
  std::map<int64_t, std::pair<double, double>> out;
  std::ifstream in(root + "/fmnist_cnn/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("split", "") == "train")
      out[j["step"].get<int64_t>()] = {j["loss"].get<double>(), j["accuracy"].get<double>()};
  }
  std::filesystem::remove_all(root);
  return out;
}

// The step's losses and hits are read once, after backward (GpuRun::read_step: per micro-batch
// slots in pinned memory): every step's loss and accuracy follow the CPU run's, micro-batch by
// micro-batch weighted as there (a slot mixed up or read before its copy landed would not).
DP_GPU_TEST(CudaTrainGpu, StepLossesAndHitsReadAfterBackwardFollowTheCpu) {
  const auto cpu = step_lines("cpu"), gpu = step_lines("cuda");
  ASSERT_EQ(cpu.size(), 8u);
  ASSERT_EQ(gpu.size(), 8u);
  for (const auto& [step, c] : cpu) {
    EXPECT_NEAR(gpu.at(step).first, c.first, 1e-3 * std::max(1.0, c.first)) << "loss of step " << step;
    EXPECT_NEAR(gpu.at(step).second, c.second, 2.0 / 192) << "accuracy of step " << step;  // a tie or two
  }
}

double short_run_accuracy(const std::string& device, const std::string& precision, nlohmann::json* device_line) {
  const std::string root = temp_root(device + precision);
  Config cfg = load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg",
                           {"run.dir=\"" + root + "\"", test::fashion_mnist_override(), "train.epochs=1",
                            "data.train_limit=30000", "train.warmup_steps=20", "train.device=\"" + device + "\"",
                            "train.precision=\"" + precision + "\"", "run.log_level=\"warn\""});
  TrainResult r = train(cfg);
  if (device_line) {
    std::ifstream in(root + "/fmnist_cnn/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      if (j.value("split", "") == "device") *device_line = j;
    }
  }
  std::filesystem::remove_all(root);
  return r.final_eval.top1;
}

DP_GPU_TEST(CudaTrainGpu, FashionMnistOnTheGpuReachesTheCpuAccuracyInEveryPrecision) {
  SKIP_WITHOUT_FASHION_MNIST();
  const double cpu = short_run_accuracy("cpu", "fp32", nullptr);
  for (const char* p : {"fp32", "bf16", "fp16"}) {
    nlohmann::json dev;
    const double gpu = short_run_accuracy("cuda", p, &dev);
    EXPECT_NEAR(gpu, cpu, 0.01) << p << ": GPU top-1 against the CPU run's";
    ASSERT_TRUE(dev.contains("peak_device_memory_bytes")) << p;
    EXPECT_GT(dev["peak_device_memory_bytes"].get<double>(), 1e6) << p;
    if (std::string(p) == "fp16") EXPECT_GE(dev["loss_scale"].get<double>(), 1.0);
    else EXPECT_EQ(dev["loss_scale"].get<double>(), 1.0);
  }
}

// The eval loss after `steps` steps of the fmnist CNN on synthetic data (1 x 28 x 28, 10 classes).
double synthetic_eval_loss(const std::string& tag, const std::vector<std::string>& sets) {
  const std::string root = temp_root(tag);
  std::vector<std::string> all{"run.dir=\"" + root + "\"", "data.dataset=\"synthetic\"", "data.synthetic_shape=[1, 28, 28]",
                               "data.synthetic_train=1280", "data.synthetic_eval=256", "train.steps=20",
                               "train.batch_size=64", "train.warmup_steps=0", "run.log_level=\"warn\"",
                               "run.tensorboard=false", "checkpoint.final=false"};
  all.insert(all.end(), sets.begin(), sets.end());
  TrainResult r = train(load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg", all));
  std::filesystem::remove_all(root);
  return r.final_eval.loss;
}

// Mixed precision on the GPU, end to end: the optimizer's pass writes the layers' bf16 weights
// (no separate cast), the batches come from the GPU's synthetic generator. Stale 16-bit weights
// (a copy not written) would leave the eval loss at the initial ln 10 = 2.30; wrong batches
// would not learn either. The same run fed by the CPU loader sees the same values (bit for bit,
// SyntheticInputGpu) and must end where it does, up to the GPU's summation order.
DP_GPU_TEST(FusedCopyTrainGpu, Bf16OnGpuMadeBatchesLearnsAsTheCpuWithSgdAndAdamW) {
  for (const auto& [opt, lr] : {std::pair<std::string, std::string>{"sgd", "0.02"}, {"adamw", "0.002"}}) {
    SCOPED_TRACE(opt);
    const std::vector<std::string> o{"train.optimizer=\"" + opt + "\"", "train.lr=" + lr};
    auto with = [&](std::vector<std::string> more) {
      more.insert(more.end(), o.begin(), o.end());
      return more;
    };
    const double cpu = synthetic_eval_loss("cpu" + opt, with({"train.device=\"cpu\""}));
    const double gpu = synthetic_eval_loss(
        "gpu" + opt, with({"train.device=\"cuda\"", "train.precision=\"bf16\"", "data.synthetic_device=\"cuda\""}));
    const double loader = synthetic_eval_loss(
        "loader" + opt, with({"train.device=\"cuda\"", "train.precision=\"bf16\"", "data.synthetic_device=\"cpu\""}));
    EXPECT_LT(cpu, 1.2) << "the CPU run did not learn: the test's premise";
    EXPECT_NEAR(gpu, cpu, 0.2 + 0.2 * cpu) << "bf16 on GPU-made batches against the CPU's fp32";
    EXPECT_NEAR(gpu, loader, 0.05) << "GPU-made batches against the CPU loader's, both bf16 on the GPU";
  }
}

}  // namespace
}  // namespace dp::launch
