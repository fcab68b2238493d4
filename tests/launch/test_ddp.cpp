// Data-parallel equivalence through the real binary (`dptrain --nproc N`, env bootstrap, ring
// collectives, bucketed all-reduce overlapped with backward): N ranks at batch b end with the
// weights of 1 rank at batch N*b (a model without batch norm), and the replicas are identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/checkpoint/safetensors.h"
#include "tests/fashion_mnist.h"
#include "tests/launch/run_files.h"

namespace {

using dp::testutil::max_abs_diff;

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";

std::string root_for(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() / ("dptrain_ddp_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p.string();
}

// Runs dptrain on the MLP cfg; returns the final weights file.
std::string run(const std::string& root, int nproc, int batch, const std::string& optimizer, bool replicas = false,
                const std::string& extra = "") {
  std::string cmd = kBin + (nproc > 1 ? " --nproc " + std::to_string(nproc) : "") + " " + DPTRAIN_SOURCE_DIR +
                    "/models/fmnist_mlp.cfg --run-dir " + root + dp::test::fashion_mnist_set() +
                    " --set train.steps=20 --set data.train_limit=4096 --set data.eval_limit=512"
                    " --set train.batch_size=" + std::to_string(batch) + " --set train.optimizer=" + optimizer +
                    // Adam divides by sqrt(v): for weights whose gradient is nearly zero (Fashion-MNIST's
                    // constant border pixels) it turns the fp32 rounding differences between one mean over
                    // N*b samples and N means over b into update differences of up to lr. eps bounds that
                    // (|d update| <= lr |d g| / eps); lr 1e-3, eps 1e-6 keep it below the 1e-5 asked.
                    (optimizer == "adamw" ? " --set train.lr=0.001 --set train.eps=1e-6" : " --set train.lr=0.01") +
                    " --set checkpoint.replicas=" + (replicas ? "true" : "false") +
                    " --set model.hidden=[64] --log-level warn " + extra + " > " + root + ".log 2>&1";
  std::filesystem::create_directories(root);
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return root + "/fmnist_mlp/final.safetensors";
}

class Ddp : public testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(Ddp, NRanksAtBatchBEqualOneRankAtBatchNB) {
  SKIP_WITHOUT_FASHION_MNIST();
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

void remove_runs(const std::vector<std::string>& roots) {
  for (const auto& r : roots) {
    std::filesystem::remove_all(r);
    std::filesystem::remove(r + ".log");
    std::filesystem::remove(r + ".diff");
    std::filesystem::remove(r + ".eval.log");
  }
}

// train.accum_steps = A: A micro-batches of b make one step of A*b, on one rank or several.
TEST(Accumulation, MicroBatchesMakeTheBatchOfTheirSum) {
  SKIP_WITHOUT_FASHION_MNIST();
  const std::string r1 = root_for("acc_one"), ra = root_for("acc_micro"), r2 = root_for("acc_ranks");
  const std::string one = run(r1, 1, 32, "sgd");
  const std::string micro = run(ra, 1, 16, "sgd", false, "--set train.accum_steps=2");
  EXPECT_LE(max_abs_diff(one, micro), 1e-5) << "1 rank, 2 x 16 vs 32";
  const std::string ranks = run(r2, 2, 4, "sgd", false, "--set train.accum_steps=4");
  EXPECT_LE(max_abs_diff(one, ranks), 1e-5) << "2 ranks, 4 x 4 each vs 32";
  // The log counts steps of the accumulated size: 20 steps, not 40.
  dp::SafetensorsFile f = dp::SafetensorsFile::open(micro);
  EXPECT_EQ(f.metadata().at("step"), "20");
  remove_runs({r1, ra, r2});
}

// dist.compress: gradients travel in 16 bits. The result stays close to the f32 run, differs
// from it (the rounding is real), and every replica is still identical.
TEST(Compression, SixteenBitGradientsStayCloseAndReplicasIdentical) {
  SKIP_WITHOUT_FASHION_MNIST();
  const std::string rf = root_for("cmp_f32");
  const std::string full = run(rf, 2, 16, "sgd");
  std::vector<std::string> roots{rf};
  for (const std::string wire : {"bf16", "fp16"}) {
    const std::string rc = root_for("cmp_" + wire);
    roots.push_back(rc);
    const std::string comp = run(rc, 2, 16, "sgd", /*replicas=*/true, "--set dist.compress=" + wire);
    const double d = max_abs_diff(full, comp);
    // Measured: bf16 5.1e-5, fp16 8.1e-6 (max abs over every weight after 20 SGD steps).
    EXPECT_GT(d, 1e-7) << wire << ": no rounding happened";
    EXPECT_LE(d, wire == "bf16" ? 2.5e-4 : 4e-5) << wire;
    int rc_diff = std::system((std::string(DPTRAIN_BINARY_DIR) + "/diffckpt --all " + rc + "/fmnist_mlp/replicas > " +
                               rc + ".diff 2>&1")
                                  .c_str());
    EXPECT_EQ(rc_diff, 0) << wire << ": replicas differ; see " << rc << ".diff";
  }
  remove_runs(roots);
}

// A model with batch norm on 2 ranks: with dist.broadcast_buffers = false and without SyncBN each
// rank's running statistics follow its own batches, so exactly those differ between replicas
// while every trainable weight is the same; with SyncBN every tensor is identical. (The default,
// broadcast_buffers = true, is BroadcastBuffers below.)
TEST(BatchNormReplicas, OnlyRunningStatisticsDifferWithoutSyncBnAndNothingWithIt) {
  SKIP_WITHOUT_FASHION_MNIST();
  std::vector<std::string> roots;
  for (const bool sync : {false, true}) {
    const std::string root = root_for(sync ? "bn_sync" : "bn_local");
    roots.push_back(root);
    std::filesystem::create_directories(root);
    const std::string cmd = kBin + " --nproc 2 " + DPTRAIN_SOURCE_DIR + "/models/fmnist_cnn.cfg --run-dir " + root +
                            dp::test::fashion_mnist_set() + " --set train.steps=12 --set train.warmup_steps=2 --set data.train_limit=1024"
                            " --set data.eval_limit=256 --set train.batch_size=32 --dump-replicas --log-level warn"
                            " --set model.sync_bn=" + (sync ? "true" : "false") +
                            " --set dist.broadcast_buffers=false > " + root + ".log 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::string diff = root + ".diff";
    const int rc = std::system((std::string(DPTRAIN_BINARY_DIR) + "/diffckpt --all " + root +
                                "/fmnist_cnn/replicas > " + diff + " 2>&1").c_str());
    std::ifstream in(diff);
    std::vector<std::string> differing;
    for (std::string line; std::getline(in, line);)
      if (line.rfind("differ: ", 0) == 0) differing.push_back(line.substr(8, line.find(' ', 8) - 8));
    if (sync) {
      EXPECT_EQ(rc, 0) << "SyncBN replicas differ; see " << diff;
      EXPECT_TRUE(differing.empty());
    } else {
      EXPECT_NE(rc, 0) << "replicas without SyncBN should differ in their running statistics";
      // The cnn preset has two batch norms: both running means and variances differ, nothing else.
      std::sort(differing.begin(), differing.end());
      EXPECT_EQ(differing, (std::vector<std::string>{"bn1.running_mean", "bn1.running_var", "bn2.running_mean",
                                                     "bn2.running_var"}))
          << "see " << diff;
    }
  }
  remove_runs(roots);
}

// The default (dist.broadcast_buffers = true, PyTorch DDP's): rank 0's buffers replace the others'
// after every step, so the default 2-rank run of the shipped cnn cfg leaves identical replicas
// (diffckpt exits 0), and its evaluation, sharded over the ranks, is one model's: a single
// process's `dptrain eval` of rank 0's replica gives the same hits and loss.
TEST(BroadcastBuffers, DefaultTwoRankRunLeavesIdenticalReplicasAndOneModelsEvaluation) {
  SKIP_WITHOUT_FASHION_MNIST();
  const std::string root = root_for("bn_broadcast");
  std::filesystem::create_directories(root);
  const std::string limits = dp::test::fashion_mnist_set() + " --set train.steps=12 train.warmup_steps=2 data.train_limit=1024 data.eval_limit=256"
                             " train.batch_size=32 train.threads=1 --log-level warn";
  const std::string cfg = std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg";
  const std::string cmd = kBin + " --nproc 2 " + cfg + " --run-dir " + root + " --dump-replicas" + limits + " > " +
                          root + ".log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string replicas = root + "/fmnist_cnn/replicas";
  EXPECT_EQ(std::system((std::string(DPTRAIN_BINARY_DIR) + "/diffckpt --all " + replicas + " > " + root + ".diff 2>&1")
                            .c_str()),
            0)
      << "replicas differ; see " << root << ".diff";
  nlohmann::json train_eval;
  std::ifstream m(root + "/fmnist_cnn/metrics.jsonl");
  for (std::string l; std::getline(m, l);)
    if (auto j = nlohmann::json::parse(l); j.value("split", "") == "eval") train_eval = j;
  const std::string eval = kBin + " eval " + cfg + " --weights " + replicas + "/replica-rank0.safetensors --out " +
                           root + "/eval.json" + limits + " > " + root + ".eval.log 2>&1";
  ASSERT_EQ(std::system(eval.c_str()), 0) << eval;
  const auto one = nlohmann::json::parse(dp::testutil::read_file(root + "/eval.json"));
  EXPECT_EQ(train_eval["step"], 12);
  EXPECT_EQ(one["samples"], train_eval["samples"]);
  EXPECT_EQ(one["top1"], train_eval["top1"]);
  EXPECT_EQ(one["top5"], train_eval["top5"]);
  EXPECT_NEAR(one["loss"].get<double>(), train_eval["loss"].get<double>(), 1e-6 * one["loss"].get<double>());
  remove_runs({root});
}

}  // namespace
