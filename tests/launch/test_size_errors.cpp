// Huge values in size keys (issue 14): one error line naming the key and the limit, exit code 2,
// instead of std::bad_alloc or an internal "check failed" (and no run directory).
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/launch/cli_capture.h"
#include "runtime/tensor.h"

namespace dp::launch {
namespace {

using CliResult = testcli::Outcome;

class SizeErrors : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dptrain_size_errors_" + std::to_string(::getpid()));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  CliResult run(const std::vector<std::string>& sets) {
    std::vector<std::string> args = {std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_mlp.cfg", "--run-dir",
                                     dir_.string(), "--log-level", "error", "--set", "train.steps=1",
                                     "data.train_limit=256", "data.eval_limit=64"};
    args.insert(args.end(), sets.begin(), sets.end());
    return testcli::dptrain_cli(args);
  }
  std::filesystem::path dir_;
};

double gib(double bytes) { return bytes / (1u << 30); }

TEST_F(SizeErrors, HiddenWidthBeyondItsRange) {
  CliResult r = run({"model.hidden=[1000000000000]"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: --set model.hidden=[1000000000000]: model.hidden[0] = 1000000000000 is out of "
                   "range [1, 16777216]\n");
}

TEST_F(SizeErrors, SyntheticShapeBeyondItsRange) {
  CliResult r = run({"data.dataset=\"synthetic\"", "data.synthetic_shape=[100000,100000,100000]"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: --set data.synthetic_shape=[100000,100000,100000]: data.synthetic_shape[0] = "
                   "100000 is out of range [1, 65536]\n");
}

TEST_F(SizeErrors, ModelLargerThanTheMachineNamesItsKeys) {
  CliResult r = run({"model.num_classes=1000000000"});
  EXPECT_EQ(r.code, 2);
  // The flat parameter arena: 784-512-256 and a 256 x 1e9 classifier, 4 bytes each.
  EXPECT_EQ(r.err, fmt::format("dptrain: error: building the model needs more memory than this machine has (one tensor "
                               "of {:.1f} GiB, the machine has {:.1f} GiB); make it smaller: model.num_classes = "
                               "1000000000, model.hidden = [512, 256]\n",
                               gib(4.0 * ((784 * 512 + 512) + (512 * 256 + 256) + (256e9 + 1e9))), gib(static_cast<double>(host_memory_bytes()))));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "fmnist_mlp")) << "a run directory for a cfg that cannot run";
}

TEST_F(SizeErrors, DataLargerThanTheMachineNamesItsKeys) {
  CliResult r = run({"data.dataset=\"synthetic\"", "data.synthetic_shape=[3,60000,60000]", "data.mean=[0,0,0]",
                     "data.std=[1,1,1]"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("dptrain: error: opening the data needs more memory than this machine has ("), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("); make it smaller: data.synthetic_shape = [3, 60000, 60000], data.synthetic_train = 10000, "
                       "data.synthetic_eval = 1000\n"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace dp::launch
