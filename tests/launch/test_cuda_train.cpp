// Training on the GPU against training on the CPU: the same cfg, seed and data give nearly the
// same weights in fp32 as both CPU implementations (the arithmetic differs only in rounding order:
// tests/launch/fp32_agreement.h), Fashion-MNIST reaches the CPU run's accuracy in fp32, bf16 and fp16,
// and fp16 reports its loss scale and peak device memory in metrics.jsonl. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "launch/train_session.h"
#include "runtime/config.h"
#include "runtime/device_memory.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/fashion_mnist.h"
#include "tests/gpu_test.h"
#include "tests/launch/fp32_agreement.h"

namespace dp::launch {
namespace {

std::string temp_root(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() / ("dptrain_cuda_train_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p.string();
}

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

}  // namespace
}  // namespace dp::launch
