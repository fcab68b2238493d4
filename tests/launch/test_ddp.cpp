// Data-parallel equivalence through the real binary (`dptrain --nproc N`, env bootstrap, ring
// collectives, bucketed all-reduce overlapped with backward): N ranks at batch b end with the
// weights of 1 rank at batch N*b (a model without batch norm), and the replicas are identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "runtime/safetensors.h"

namespace {

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
const std::string kData = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

std::string root_for(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() / ("dptrain_ddp_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p.string();
}

// Runs dptrain on the MLP cfg; returns the final weights file.
std::string run(const std::string& root, int nproc, int batch, const std::string& optimizer, bool replicas = false) {
  std::string cmd = kBin + (nproc > 1 ? " --nproc " + std::to_string(nproc) : "") + " " + DPTRAIN_SOURCE_DIR +
                    "/models/fmnist_mlp.cfg --run-dir " + root +
                    " --set train.steps=20 --set data.train_limit=4096 --set data.eval_limit=512"
                    " --set train.batch_size=" + std::to_string(batch) + " --set train.optimizer=" + optimizer +
                    // Adam divides by sqrt(v): for weights whose gradient is nearly zero (Fashion-MNIST's
                    // constant border pixels) it turns the fp32 rounding differences between one mean over
                    // N*b samples and N means over b into update differences of up to lr. eps bounds that
                    // (|d update| <= lr |d g| / eps); lr 1e-3, eps 1e-6 keep it below the 1e-5 asked.
                    (optimizer == "adamw" ? " --set train.lr=0.001 --set train.eps=1e-6" : " --set train.lr=0.01") +
                    " --set checkpoint.replicas=" + (replicas ? "true" : "false") +
                    " --set model.hidden=[64] --log-level warn > " + root + ".log 2>&1";
  std::filesystem::create_directories(root);
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return root + "/fmnist_mlp/final.safetensors";
}

double max_abs_diff(const std::string& a, const std::string& b) {
  dp::SafetensorsFile fa = dp::SafetensorsFile::open(a), fb = dp::SafetensorsFile::open(b);
  EXPECT_EQ(fa.names(), fb.names());
  double worst = 0;
  for (const auto& name : fa.names()) {
    dp::Tensor x = fa.get(name), y = fb.get(name);
    EXPECT_EQ(x.shape(), y.shape()) << name;
    for (int64_t i = 0; i < x.numel(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(x.data<float>()[i]) - y.data<float>()[i]));
  }
  return worst;
}

class Ddp : public testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(Ddp, NRanksAtBatchBEqualOneRankAtBatchNB) {
  if (!std::filesystem::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const auto [n, optimizer] = GetParam();
  const std::string tag = std::to_string(n) + optimizer;
  const std::string r1 = root_for("one" + tag), rn = root_for("many" + tag);
  const std::string one = run(r1, 1, 16 * n, optimizer);
  const std::string many = run(rn, n, 16, optimizer, /*replicas=*/true);
  const double d = max_abs_diff(one, many);
  EXPECT_LE(d, 1e-5) << n << " ranks vs 1 rank, " << optimizer;
  // Every replica equals rank 0's, bit for bit.
  int rc = std::system((std::string(DPTRAIN_BINARY_DIR) + "/diffckpt --all " + rn + "/fmnist_mlp/replicas > " + rn +
                        ".diff 2>&1")
                           .c_str());
  EXPECT_EQ(rc, 0) << "replicas differ; see " << rn << ".diff";
  for (const auto& r : {r1, rn}) {
    std::filesystem::remove_all(r);
    std::filesystem::remove(r + ".log");
  }
  std::filesystem::remove(rn + ".diff");
}

INSTANTIATE_TEST_SUITE_P(Ranks, Ddp,
                         testing::Values(std::make_tuple(2, std::string("sgd")), std::make_tuple(2, std::string("adamw")),
                                         std::make_tuple(4, std::string("sgd")), std::make_tuple(4, std::string("adamw"))),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param);
                         });

}  // namespace
