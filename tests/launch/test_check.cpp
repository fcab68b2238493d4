// dptrain --check model.cfg: validates the cfg and the data files, prints the resolved model and
// writes nothing (issue 14).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

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


// Tar shards are indexed in a scratch folder: --check left tar-index/ in the current folder
// (open_datasets' default) before.
TEST_F(Check, TarShardsLeaveNoIndexBehind) {
  const std::filesystem::path data = dir_ / "data", cwd = dir_ / "cwd";
  std::filesystem::create_directories(data);
  std::filesystem::create_directories(cwd);
  // One 2 x 2 gray PNG (written by PIL) and its label, packed by GNU tar.
  const unsigned char png[] = {0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48,
                               0x44, 0x52, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, 0x00, 0x00,
                               0x00, 0x57, 0xdd, 0x52, 0xf8, 0x00, 0x00, 0x00, 0x0e, 0x49, 0x44, 0x41, 0x54, 0x78,
                               0x9c, 0x63, 0x60, 0x60, 0x60, 0x60, 0x60, 0x00, 0x00, 0x00, 0x06, 0x00, 0x01, 0x72,
                               0x82, 0x99, 0xea, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60,
                               0x82};
  std::ofstream(data / "k1.png", std::ios::binary).write(reinterpret_cast<const char*>(png), sizeof png);
  std::ofstream(data / "k1.cls") << "0";
  ASSERT_EQ(std::system(("tar -cf " + (data / "s.tar").string() + " -C " + data.string() + " k1.png k1.cls").c_str()), 0);
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(cwd);
  Outcome r = dptrain({"--check", mlp_, "--run-dir", (dir_ / "runs").string(), "--set", "data.dataset=\"tar_shards\"",
                       "data.path=\"" + (data / "s.tar").string() + "\"", "data.val_path=\"" + (data / "s.tar").string() + "\"",
                       "data.image_size=2", "data.mean=[0.5, 0.5, 0.5]", "data.std=[0.5, 0.5, 0.5]"});
  std::filesystem::current_path(before);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(": ok (nothing written)\n"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(cwd)) << "--check wrote into the current folder";
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs"));
}

}  // namespace
}  // namespace dp::launch
