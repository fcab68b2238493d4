// The dptrain command line: a malformed cfg is one exact error line on stderr and exit code 2,
// before any run directory is created.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "launch/cli.h"

namespace dp::launch {
namespace {

struct CliResult {
  int code;
  std::string err;
};

CliResult run(std::vector<std::string> args) {
  std::vector<char*> argv;
  args.insert(args.begin(), "dptrain");
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStderr();
  int code = run_cli(static_cast<int>(argv.size()), argv.data());
  return {code, testing::internal::GetCapturedStderr()};
}

class Cli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dptrain_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& text) {
    std::string p = (dir_ / "m.cfg").string();
    std::ofstream(p) << text;
    return p;
  }
  std::filesystem::path dir_;
};

TEST_F(Cli, UnknownLayerTypeListsKnownTypes) {
  std::string p = write("[run]\ndir = \"" + dir_.string() + "/runs\"\n\n[[layer]]\ntype = \"flatten\"\n\n[[layer]]\n"
                        "type = \"linaer\"\nname = \"fc\"\nout_features = 10\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p +
                       ":7: layer 'fc': unknown layer type 'linaer' (did you mean 'linear'?); known types: add, "
                       "avgpool2d, batchnorm2d, conv2d, dropout, flatten, global_avgpool, linear, maxpool2d, relu\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs")) << "a bad cfg must not create a run directory";
}

TEST_F(Cli, MissingRequiredLayerKey) {
  std::string p = write("[[layer]]\ntype = \"flatten\"\n\n[[layer]]\ntype = \"linear\"\nname = \"fc\"\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p + ":4: layer 'fc' (linear): missing required key 'out_features' (an integer)\n");
}

TEST_F(Cli, UnknownLayerKeySuggestsClosest) {
  std::string p = write("[[layer]]\ntype = \"conv2d\"\nname = \"c\"\nout_channels = 4\nkernal = 3\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p +
                       ":5: layer 'c' (conv2d): unknown key 'kernal' (did you mean 'kernel'?); valid keys: "
                       "out_channels, kernel, stride, padding, groups, bias, init\n");
}

TEST_F(Cli, LayerValueOutOfRange) {
  std::string p = write("[[layer]]\ntype = \"dropout\"\nname = \"d\"\np = 1.5\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p + ":4: layer 'd' (dropout): key 'p' = 1.5 is out of range [0, 0.999999]\n");
}

TEST_F(Cli, LayerInputMustExist) {
  std::string p = write("[[layer]]\ntype = \"flatten\"\n\n[[layer]]\ntype = \"add\"\nname = \"a\"\n"
                        "inputs = [\"flatten1\", \"nope\"]\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p +
                       ":4: layer 'a' takes input 'nope', which is not an earlier layer (layers must be listed after "
                       "their inputs; 'input' is the model input)\n");
}

TEST_F(Cli, MissingConfigFile) {
  auto r = run({"/nonexistent.cfg"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: cannot read config file '/nonexistent.cfg': No such file or directory (give the "
                   "path of a model.cfg, e.g. models/fmnist_cnn.cfg)\n");
}

TEST_F(Cli, UnknownPresetSuggests) {
  std::string p = write("[model]\npreset = \"resnet19\"\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p +
                       ":2: model.preset = \"resnet19\" is not allowed (did you mean \"resnet18\"?); use one of: mlp, "
                       "cnn, resnet18, resnet50, cifar_resnet18\n");
}

}  // namespace
}  // namespace dp::launch
