// Training with the convolutions on cuDNN's graph API (train.cudnn_api = "graph") against the
// legacy API: the same cfg, seed and data give nearly the same weights after a few SGD steps in
// every precision, and Fashion-MNIST reaches the CPU run's accuracy. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "tests/fashion_mnist.h"
#include "tests/gpu_test.h"
#include "launch/train_session.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/config.h"
#include "runtime/device_memory.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {


std::string temp_root(const std::string& tag) { return testutil::temp_root("cudnn_graph", tag); }

// max |a - b| / max |b| over every f32 tensor of two weights files (same names).
double weights_error(const std::string& a_path, const std::string& b_path) {
  SafetensorsFile a = SafetensorsFile::open(a_path), b = SafetensorsFile::open(b_path);
  double num = 0, den = 0;
  for (const auto& name : b.names()) {
    Tensor x = a.get(name), y = b.get(name);
    if (y.dtype() != DType::F32) continue;
    for (int64_t i = 0; i < y.numel(); ++i) {
      num = std::max(num, std::abs(double{x.data<float>()[i]} - y.data<float>()[i]));
      den = std::max(den, std::abs(double{y.data<float>()[i]}));
    }
  }
  return num / den;
}

// The final weights of 5 SGD steps of the Fashion-MNIST CNN on synthetic data on the GPU.
std::string sgd_run(const std::string& root, const std::string& precision, const std::string& api) {
  Config cfg = load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg",
                           {"run.dir=\"" + root + "\"", "data.dataset=\"synthetic\"", "data.synthetic_shape=[1, 28, 28]",
                            "data.synthetic_train=320", "data.synthetic_eval=64", "train.steps=5", "train.batch_size=64",
                            "train.optimizer=\"sgd\"", "train.lr=0.05", "train.warmup_steps=0", "train.device=\"cuda\"",
                            "train.precision=\"" + precision + "\"", "train.cudnn_api=\"" + api + "\"",
                            "run.log_level=\"warn\""});
  train(cfg);
  return root + "/fmnist_cnn/final.safetensors";
}

struct Precision {
  const char* name;
  double tol;  // relative weight difference after 5 steps; 16-bit: a bias added before or after the
               // output rounding and other engines' summation orders differ by ~1 ulp per value
};

class CudnnGraphTrainGpu : public gputest::GpuTestWithParam<Precision> {};

DP_GPU_TEST_P(CudnnGraphTrainGpu, WeightsMatchTheLegacyApiAfterFiveSgdSteps) {
  const Precision p = GetParam();
  const std::string l = temp_root(std::string("legacy_") + p.name), g = temp_root(std::string("graph_") + p.name);
  const double err = weights_error(sgd_run(g, p.name, "graph"), sgd_run(l, p.name, "legacy"));
  std::filesystem::remove_all(l);
  std::filesystem::remove_all(g);
  EXPECT_LT(err, p.tol) << p.name << ": graph-API weights after 5 SGD steps against the legacy API's";
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudnnGraphTrainGpu,
                         ::testing::Values(Precision{"fp32", 1e-5}, Precision{"bf16", 2e-2}, Precision{"fp16", 4e-3}),
                         [](const ::testing::TestParamInfo<Precision>& i) { return std::string(i.param.name); });

double short_run_accuracy(const std::string& device, const std::string& precision, const std::string& api) {
  const std::string root = temp_root(device + precision + api);
  Config cfg = load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg",
                           {"run.dir=\"" + root + "\"", test::fashion_mnist_override(), "train.epochs=1", "data.train_limit=30000",
                            "train.warmup_steps=20", "train.device=\"" + device + "\"",
                            "train.precision=\"" + precision + "\"", "train.cudnn_api=\"" + api + "\"",
                            "run.log_level=\"warn\""});
  TrainResult r = train(cfg);
  std::filesystem::remove_all(root);
  return r.final_eval.top1;
}

DP_GPU_TEST(CudnnGraphAccuracyGpu, FashionMnistReachesTheCpuAccuracyInEveryPrecision) {
  SKIP_WITHOUT_FASHION_MNIST();
  const double cpu = short_run_accuracy("cpu", "fp32", "legacy");
  for (const char* p : {"fp32", "bf16", "fp16"})
    EXPECT_NEAR(short_run_accuracy("cuda", p, "graph"), cpu, 0.01) << p << ": GPU (graph API) top-1 against the CPU run's";
}

}  // namespace
}  // namespace dp::launch
