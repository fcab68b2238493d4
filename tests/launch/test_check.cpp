// dptrain --check model.cfg: validates the cfg and the data files, prints the resolved model and
// writes nothing (issue 14).
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/launch/cli_capture.h"

namespace dp::launch {
namespace {

using testcli::Outcome;
Outcome dptrain(std::vector<std::string> args) { return testcli::dptrain_cli(std::move(args)); }

class Check : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dptrain_check_" + std::to_string(::getpid()));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  const std::string mlp_ = std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_mlp.cfg";
};

TEST_F(Check, PrintsTheResolvedModelAndWritesNothing) {
  Outcome r = dptrain({"--check", mlp_, "--run-dir", dir_.string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), mlp_ + ": ok (nothing written)");
  EXPECT_NE(r.out.find("\ndata: train IDX /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(": 60000 x [1, 28, 28], 10 classes (60000 samples used), eval 10000 samples\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n  fc1                          linear           out [512]              params 401920\n"),
            std::string::npos)
      << r.out;
  // 784-512-256-10: 401920 + 131328 + 2570 parameters.
  EXPECT_NE(r.out.find("\nmodel mlp: 535818 parameters (2.14 MB in f32)\n"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_)) << "--check created " << dir_;
  // The overrides count: a wider hidden layer.
  r = dptrain({"--check", mlp_, "--run-dir", dir_.string(), "--set", "model.hidden=[100]"});
  EXPECT_NE(r.out.find("\nmodel mlp: 79510 parameters"), std::string::npos) << r.out;  // 784*100+100 + 100*10+10
}

TEST_F(Check, BadDataFilesAreTheError) {
  Outcome r = dptrain({"--check", mlp_, "--run-dir", dir_.string(), "--set", "data.path=\"" + dir_.string() + "/none\""});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("dptrain: error: "), std::string::npos);
  EXPECT_NE(r.err.find(dir_.string() + "/none"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "fmnist_mlp"));
}

TEST_F(Check, ModelThatDoesNotFitTheDataIsTheError) {
  Outcome r = dptrain({"--check", mlp_, "--run-dir", dir_.string(), "--set", "model.num_classes=5"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: the model outputs 5 classes but the data set has 10; set model.num_classes = 10\n");
}

}  // namespace
}  // namespace dp::launch
