// End-to-end training on the CPU: a short Fashion-MNIST run reaches 0.85 test accuracy, and
// the same seed gives bitwise-identical final weights (a different seed does not).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "launch/train_session.h"
#include "launch/train_setup.h"
#include "runtime/config.h"
#include "runtime/device_memory.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/fashion_mnist.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

std::string temp_root(const std::string& tag) { return testutil::temp_root("train", tag); }

// Every tensor of a weights file, name and raw bytes, in file order. (The file's metadata holds
// the resolved config, whose run.dir differs between the runs compared here.)
std::string tensor_bytes_of(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  std::string out;
  for (const auto& name : f.names()) {
    Tensor t = f.get(name);
    out += name + ":" + std::string(static_cast<const char*>(t.raw()), t.nbytes()) + ";";
  }
  return out;
}

TEST(Train, FashionMnistCnnShortRunReaches085) {
  SKIP_WITHOUT_FASHION_MNIST();
  const std::string root = temp_root("acc");
  // The shipped cfg, shortened: a third of the training set, one epoch.
  Config cfg = load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg",
                           {"run.dir=\"" + root + "\"", test::fashion_mnist_override(), "train.epochs=1",
                            "data.train_limit=30000", "train.warmup_steps=20", "run.log_level=\"warn\""});
  TrainResult r = train(cfg);
  std::filesystem::remove_all(root);
  EXPECT_EQ(r.final_eval.samples, 10000);
  EXPECT_GE(r.final_eval.top1, 0.85) << "test accuracy after the short run";
  EXPECT_GE(r.final_eval.top5, r.final_eval.top1);
}

TEST(Train, SameSeedGivesBitwiseIdenticalWeights) {
  SKIP_WITHOUT_FASHION_MNIST();
  auto run_once = [](const std::string& root, int seed) {
    Config cfg = load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg",
                             {"run.dir=\"" + root + "\"", test::fashion_mnist_override(), "train.steps=12",
                              "train.batch_size=64",
                              "train.warmup_steps=2", "data.train_limit=2048", "data.eval_limit=256",
                              "model.dropout=0.25",
                              "data.crop_padding=2", "data.hflip=true", "run.seed=" + std::to_string(seed),
                              "run.log_level=\"warn\""});
    train(cfg);
    return tensor_bytes_of(root + "/fmnist_cnn/final.safetensors");
  };
  const std::string a = temp_root("a"), b = temp_root("b"), c = temp_root("c");
  std::string wa = run_once(a, 1), wb = run_once(b, 1), wc = run_once(c, 2);
  for (const auto& r : {a, b, c}) std::filesystem::remove_all(r);
  ASSERT_GT(wa.size(), 100000u);
  EXPECT_TRUE(wa == wb) << "same seed, different final weights";
  EXPECT_FALSE(wa == wc) << "a different seed should change the weights";
}

TEST(Train, NoGpuMeansCpuAndAskingForCudaIsAClearError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_TRUE(choose_device(cuda::DeviceRequest::Auto).is_cpu());
  EXPECT_TRUE(choose_device(cuda::DeviceRequest::Cpu).is_cpu());
  try {
    choose_device(cuda::DeviceRequest::Cuda);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "train.device = \"cuda\" but no usable GPU was found (no driver, no device, or a build "
                           "without CUDA); use train.device = \"auto\" or \"cpu\"");
  }
}

// fp16 (bf16 runs on CPUs with AVX-512-BF16 or AMX, else it is refused: tests/launch/test_cpu_bf16.cpp).
TEST(Train, Fp16PrecisionOnTheCpuIsAClearError) {
  const std::string root = temp_root("prec");
  Config cfg = load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_mlp.cfg",
                           {"run.dir=\"" + root + "\"", "train.device=\"cpu\"", "train.precision=\"fp16\"",
                            "data.dataset=\"synthetic\"", "data.synthetic_shape=[1, 28, 28]", "run.log_level=\"warn\""});
  try {
    train(cfg);
    FAIL() << "fp16 on the CPU should be refused";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "train.precision = \"fp16\" needs a GPU and this process trains on the CPU, which computes "
                           "in fp32 or bf16: set train.precision = \"bf16\" or \"fp32\", or train on a GPU "
                           "(train.device = \"cuda\")");
  }
  EXPECT_FALSE(std::filesystem::exists(root)) << "nothing is written for a refused cfg";
  std::filesystem::remove_all(root);
}

TEST(Train, WritesRunDirectory) {
  const std::string root = temp_root("dir");
  Config cfg = parse_config(
      "[run]\nname = \"syn\"\n[data]\ndataset = \"synthetic\"\nsynthetic_shape = [1, 6, 6]\nsynthetic_train = 256\n"
      "synthetic_eval = 64\nmean = [0.5]\nstd = [0.25]\n[model]\npreset = \"mlp\"\nhidden = [32]\n"
      "[train]\nsteps = 8\nbatch_size = 32\nlog_every = 4\n",
      "syn.cfg", {"run.dir=\"" + root + "\"", "run.log_level=\"warn\""});
  TrainResult r = train(cfg);
  EXPECT_EQ(r.steps, 8);
  EXPECT_TRUE(std::filesystem::exists(root + "/syn/config.toml"));
  EXPECT_TRUE(std::filesystem::exists(root + "/syn/logs/rank-0.log"));
  EXPECT_TRUE(std::filesystem::exists(root + "/syn/final.safetensors"));
  // The resolved config parses back to the same run.
  Config back = load_config(root + "/syn/config.toml");
  EXPECT_EQ(back.train.steps, 8);
  EXPECT_EQ(back.data.synthetic_shape, (std::vector<int64_t>{1, 6, 6}));
  std::ifstream m(root + "/syn/metrics.jsonl");
  int lines = 0;
  for (std::string l; std::getline(m, l);) lines += !l.empty();
  EXPECT_EQ(lines, 3) << "two train lines (steps 4, 8) and one eval line";
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace dp::launch
