// `dptrain eval` and `dptrain predict` (launch/inference.h, launch/predict_input.h): the pure top-k
// ranking and sample naming; the input readers and their errors; and through the real binary,
// eval on 2 ranks equals eval on 1 (and the training run's own final evaluation), from the final
// weights, a checkpoint or a plain state_dict alike; predict on 2 ranks writes what 1 rank writes,
// one line per sample in input order. (Predictions against PyTorch: tests/oracle/test_predict_torch.py.)
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "launch/inference.h"
#include "launch/predict_input.h"
#include "launch/train_session.h"
#include "runtime/data/file_bytes.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/config.h"
#include "tests/fashion_mnist.h"
#include "tests/launch/run_files.h"
#include "tests/runtime/data/data_test_util.h"
#include "tests/runtime/data/tiny_images.h"

namespace dp::launch {
namespace {

using dp::testutil::read_file;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(Inference, SoftmaxTopKTiesGoToTheLowerClass) {
  const float z[] = {1, 3, 3, 0};
  const auto top = softmax_top_k(z, 4, 3);
  const double sum = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(0.0);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 2);
  EXPECT_EQ(top[2].first, 0);
  EXPECT_NEAR(top[0].second, std::exp(3.0) / sum, 1e-15);
  EXPECT_NEAR(top[2].second, std::exp(1.0) / sum, 1e-15);
  EXPECT_EQ(softmax_top_k(z, 4, 10).size(), 4u) << "k is clamped to the classes";
}

TEST(Inference, SampleSourceNamesFileAndIndex) {
  PredictInput in;
  in.files = {{"a.idx", 0, 3}, {"b.png", 3, 1}, {"c.png", 4, 1}};
  EXPECT_EQ(*sample_source(in, 0).file, "a.idx");
  EXPECT_EQ(sample_source(in, 2).index, 2);
  EXPECT_EQ(*sample_source(in, 3).file, "b.png");
  EXPECT_EQ(sample_source(in, 3).index, -1) << "a file of one sample has no index";
  EXPECT_EQ(*sample_source(in, 4).file, "c.png");
}

class PredictInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dptrain_predict_in_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string error_of(const std::string& path) {
    try {
      open_predict_input(path);
    } catch (const UserError& e) {
      return e.what();
    }
    return "<no error>";
  }
  fs::path dir_;
};

TEST_F(PredictInputs, IdxImagesInFileOrder) {
  const std::string p = (dir_ / "x-images-idx3-ubyte").string();
  std::ofstream f(p, std::ios::binary);
  const unsigned char header[] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
  f.write(reinterpret_cast<const char*>(header), 16);
  for (int i = 0; i < 12; ++i) f.put(static_cast<char>(i * 20));
  f.close();
  const PredictInput in = open_predict_input(p);
  ASSERT_EQ(in.samples->size(), 3);
  EXPECT_EQ(in.samples->sample_shape(), (Shape{1, 2, 2}));
  float x[4];
  in.samples->get(2, x);
  EXPECT_EQ(x[1], 180.0f / 255.0f);
  EXPECT_EQ(in.what, "IDX images " + p + ": 3 x [1, 2, 2]");
}

TEST_F(PredictInputs, ImageFolderAndTarShardsOneFilePerImageInInputOrder) {
  using data::testing::kTinyJpeg;
  using data::testing::kTinyPng;
  using data::testing::tar_of;
  using data::testing::text;
  using data::testing::write;
  const std::string d = dir_.string();
  write(d + "/imgs/b.png", kTinyPng);
  write(d + "/imgs/a/z.jpg", kTinyJpeg);
  write(d + "/imgs/notes.txt", text("not an image"));
  data::ImageOptions o;
  o.eval_crop.size = 6;
  o.eval_crop.resize = 7;
  const PredictInput folder = open_predict_input(d + "/imgs", o);
  ASSERT_EQ(folder.samples->size(), 2);
  EXPECT_EQ(folder.samples->sample_shape(), (Shape{3, 6, 6}));
  ASSERT_EQ(folder.files.size(), 2u);
  EXPECT_EQ(folder.files[0].path, d + "/imgs/b.png") << "a folder's own files before its subfolders'";
  EXPECT_EQ(folder.files[1].path, d + "/imgs/a/z.jpg");
  EXPECT_EQ(folder.files[1].first, 1);
  EXPECT_EQ(*sample_source(folder, 1).file, d + "/imgs/a/z.jpg");
  EXPECT_EQ(sample_source(folder, 1).index, -1);
  EXPECT_EQ(folder.what, "images " + d + "/imgs: 2 x [3, 6, 6]");

  const std::vector<uint8_t> shard = tar_of({{"k1.png", kTinyPng}, {"k2.jpg", kTinyJpeg}});
  write(d + "/s-0.tar", shard);
  write(d + "/s-1.tar", tar_of({{"k3.jpg", kTinyJpeg}}));
  const PredictInput tars = open_predict_input(d + "/s-{0..1}.tar", o, d + "/index");
  ASSERT_EQ(tars.files.size(), 3u);
  EXPECT_EQ(tars.files[0].path, d + "/s-0.tar:k1");
  EXPECT_EQ(tars.files[2].path, d + "/s-1.tar:k3");
  EXPECT_FALSE(tars.samples->labeled());
  std::vector<float> a(36 * 3), b(36 * 3);
  tars.samples->get(1, a.data());
  folder.samples->get(1, b.data());
  EXPECT_EQ(a, b) << "the same JPEG, the same crop";
}

TEST_F(PredictInputs, WhatCannotBeReadIsOneClearError) {
  const std::string reads =
      "dptrain predict reads a folder of images, tar shards (shard-{000..009}.tar), an IDX image file (e.g. "
      "t10k-images-idx3-ubyte.gz) or a CIFAR-10 binary file (*.bin)";
  fs::create_directories(dir_ / "empty");
  EXPECT_EQ(error_of((dir_ / "empty").string()),
            (dir_ / "empty").string() + ": no .jpg, .jpeg or .png image in this folder or below it");
  EXPECT_EQ(error_of((dir_ / "none.bin").string()), "--input " + (dir_ / "none.bin").string() + ": no such file; " + reads);
  std::ofstream((dir_ / "junk.txt").string()) << "hello";
  EXPECT_EQ(error_of((dir_ / "junk.txt").string()),
            "--input " + (dir_ / "junk.txt").string() +
                ": neither an IDX image file (magic 0x00000803) nor CIFAR-10 records (3073 bytes each, in a *.bin "
                "file); " + reads);
}

// ---- through the binary ----

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
const std::string kCfg = std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg";

int sh(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

nlohmann::json json_of(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

class InferenceRuns : public ::testing::Test {
 protected:
  // A short Fashion-MNIST cnn run (its final weights, a checkpoint, and its last eval line).
  static void SetUpTestSuite() {
    root_ = (fs::temp_directory_path() / ("dptrain_inference_" + std::to_string(::getpid()))).string();
    fs::remove_all(root_);
    if (test::fashion_mnist_dir().empty()) return;
    train(load_config(kCfg, {"run.dir=\"" + root_ + "\"", test::fashion_mnist_override(), "run.name=\"a\"",
                             "run.log_level=\"warn\"", "data.train_limit=1024", "data.eval_limit=300",
                             "train.steps=6", "train.warmup_steps=2", "train.batch_size=64", "train.threads=1"}));
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  void SetUp() override { SKIP_WITHOUT_FASHION_MNIST(); }
  static std::string eval(int nproc, const std::string& weights, const std::string& out) {
    return fmt::format("{} {} eval {} --weights {} --out {}{} --set data.eval_limit=300 train.batch_size=64 "
                       "train.threads=1 --log-level warn > {}.log 2>&1",
                       kBin, nproc > 1 ? fmt::format("--nproc {}", nproc) : "", kCfg, weights, out,
                       test::fashion_mnist_set(), out);
  }
  static inline std::string root_;
};

TEST_F(InferenceRuns, EvalOnTwoRanksEqualsOneAndTheTrainingRunsEvaluation) {
  const std::string final_w = root_ + "/a/final.safetensors";
  ASSERT_EQ(sh(eval(1, final_w, root_ + "/e1.json")), 0) << read_file(root_ + "/e1.json.log");
  ASSERT_EQ(sh(eval(2, final_w, root_ + "/e2.json")), 0) << read_file(root_ + "/e2.json.log");
  const auto e1 = json_of(root_ + "/e1.json"), e2 = json_of(root_ + "/e2.json");
  EXPECT_EQ(e1["samples"], 300);
  EXPECT_EQ(e2["samples"], 300);
  EXPECT_EQ(e2["ranks"], 2);
  EXPECT_EQ(e1["top1"], e2["top1"]) << "hit counts are exact";
  EXPECT_EQ(e1["top5"], e2["top5"]);
  EXPECT_NEAR(e1["loss"].get<double>(), e2["loss"].get<double>(), 1e-6 * e1["loss"].get<double>())
      << "per-sample losses in float, summed per rank then all-reduced";
  // The training run's own final evaluation (1 rank, the same batches): the same numbers.
  nlohmann::json last;
  std::ifstream m(root_ + "/a/metrics.jsonl");
  for (std::string l; std::getline(m, l);)
    if (nlohmann::json j = nlohmann::json::parse(l); j.value("split", "") == "eval") last = j;
  EXPECT_EQ(last["top1"], e1["top1"]);
  EXPECT_EQ(last["loss"], e1["loss"]);
  // The same weights as a checkpoint and as a plain state_dict (no dptrain metadata).
  const std::string ckpt = root_ + "/a/checkpoints/step-00000006.safetensors";
  ASSERT_EQ(sh(eval(1, ckpt, root_ + "/e3.json")), 0) << read_file(root_ + "/e3.json.log");
  SafetensorsFile f = SafetensorsFile::open(final_w);
  std::vector<std::pair<std::string, Tensor>> sd;
  for (const auto& n : f.names()) sd.emplace_back(n, f.get(n));
  write_safetensors(root_ + "/sd.safetensors", sd);
  ASSERT_EQ(sh(eval(1, root_ + "/sd.safetensors", root_ + "/e4.json")), 0) << read_file(root_ + "/e4.json.log");
  for (const std::string e : {"/e3.json", "/e4.json"}) {
    EXPECT_EQ(json_of(root_ + e)["loss"], e1["loss"]) << e;
    EXPECT_EQ(json_of(root_ + e)["top1"], e1["top1"]) << e;
  }
}

// eval computes on the kernels the cfg names (train.cpu_backend), like the training run: a run on
// the reference kernels is evaluated to its own final evaluation's bits (oneDNN's differ in the
// last bits), and the log says which kernels ran.
TEST_F(InferenceRuns, EvalRunsOnTheCpuBackendTheConfigNames) {
  const std::string set = "train.cpu_backend=\"reference\"";
  train(load_config(kCfg, {"run.dir=\"" + root_ + "\"", test::fashion_mnist_override(), "run.name=\"ref\"",
                           "run.log_level=\"warn\"", "data.train_limit=1024", "data.eval_limit=300", "train.steps=6",
                           "train.warmup_steps=2", "train.batch_size=64", "train.threads=1", set}));
  const std::string out = root_ + "/eref.json";
  ASSERT_EQ(sh(fmt::format("{} eval {} --weights {}/ref/final.safetensors --out {}{} --set data.eval_limit=300 "
                           "train.batch_size=64 train.threads=1 train.cpu_backend=reference > {}.log 2>&1",
                           kBin, kCfg, root_, out, test::fashion_mnist_set(), out)),
            0)
      << read_file(out + ".log");
  EXPECT_NE(read_file(out + ".log").find("CPU kernels: reference (im2col + BLAS, NCHW, unfused)"), std::string::npos)
      << read_file(out + ".log");
  nlohmann::json last;
  std::ifstream m(root_ + "/ref/metrics.jsonl");
  for (std::string l; std::getline(m, l);)
    if (nlohmann::json j = nlohmann::json::parse(l); j.value("split", "") == "eval") last = j;
  ASSERT_FALSE(last.is_null());
  EXPECT_EQ(json_of(out)["loss"], last["loss"]) << "bitwise: the same kernels as the training run";
  EXPECT_EQ(json_of(out)["top1"], last["top1"]);
}

TEST_F(InferenceRuns, PredictOnTwoRanksWritesWhatOneRankWritesInInputOrder) {
  // The first 1000 test images, as a plain IDX file.
  const std::vector<uint8_t> t10k = data::read_file_bytes(test::fashion_mnist_file("t10k-images-idx3-ubyte.gz"));
  const std::string input = root_ + "/first1000-images-idx3-ubyte";
  {
    std::vector<uint8_t> head(t10k.begin(), t10k.begin() + 16 + 1000 * 784);
    head[4] = 0, head[5] = 0, head[6] = 0x03, head[7] = 0xe8;  // n = 1000, big-endian
    std::ofstream(input, std::ios::binary).write(reinterpret_cast<const char*>(head.data()), head.size());
  }
  std::vector<std::vector<nlohmann::json>> lines(3);
  for (int nproc : {1, 2}) {
    const std::string out = fmt::format("{}/p{}.jsonl", root_, nproc);
    ASSERT_EQ(sh(fmt::format("{} {} predict {} --weights {}/a/final.safetensors --input {} --out {} --topk 3 "
                             "--set train.threads=1 --log-level warn > {}.log 2>&1",
                             kBin, nproc > 1 ? "--nproc 2" : "", kCfg, root_, input, out, out)),
              0)
        << read_file(out + ".log");
    EXPECT_THAT(read_file(out + ".log"), HasSubstr("predict: 1000 predictions (top 3) written to " + out));
    std::ifstream in(out);
    for (std::string l; std::getline(in, l);) lines[nproc].push_back(nlohmann::json::parse(l));
  }
  ASSERT_EQ(lines[1].size(), 1000u);
  ASSERT_EQ(lines[2].size(), 1000u);
  double worst = 0;
  for (size_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(lines[1][i]["input"], input);
    ASSERT_EQ(lines[1][i]["index"], i);
    ASSERT_EQ(lines[2][i]["index"], i);
    ASSERT_EQ(lines[1][i]["classes"].size(), 3u);
    const auto &a = lines[1][i]["probs"], &b = lines[2][i]["probs"];
    EXPECT_GE(a[0].get<double>(), a[1].get<double>());
    if (lines[1][i]["classes"] != lines[2][i]["classes"]) {
      EXPECT_NEAR(a[0].get<double>(), a[1].get<double>(), 1e-5) << "only a near-tie may swap, line " << i;
    }
    for (size_t j = 0; j < 3; ++j) worst = std::max(worst, std::abs(a[j].get<double>() - b[j].get<double>()));
  }
  EXPECT_LE(worst, 1e-5) << "the same model on other batch compositions";
}

TEST_F(InferenceRuns, MismatchedWeightsAndMissingArgumentsAreClearErrors) {
  const std::string out = root_ + "/bad.log";
  EXPECT_EQ(sh(fmt::format("{} eval {} --weights {}/nope.safetensors > {} 2>&1", kBin, kCfg, root_, out)), 2);
  EXPECT_EQ(read_file(out), "dptrain: error: --weights " + root_ +
                                "/nope.safetensors: no such file (give a final.safetensors, a checkpoint or a "
                                "safetensors state_dict)\n");
  EXPECT_EQ(sh(fmt::format("{} eval {} --weights {}/a/final.safetensors --set model.num_classes=12 "
                           "--log-level warn > {} 2>&1",
                           kBin, kCfg, root_, out)),
            2);
  EXPECT_THAT(read_file(out), HasSubstr("do not fit the model: 2 problems: 'fc2.weight': the model has f32[12, 128], "
                                        "the file f32[10, 128]; 'fc2.bias': the model has f32[12], the file f32[10]. "
                                        "Check that the cfg builds the model these weights are of"));
  EXPECT_EQ(sh(fmt::format("{} predict {} --weights {}/a/final.safetensors > {} 2>&1", kBin, kCfg, root_, out)), 106)
      << "CLI11's exit code for a missing required option";
  EXPECT_THAT(read_file(out), HasSubstr("--input is required"));
}

}  // namespace
}  // namespace dp::launch
