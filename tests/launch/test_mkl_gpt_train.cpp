// train.cpu_gemm = "mkl" through the real trainer (skipped, saying so, without MKL): the tiny GPT of
// test_synthetic_tokens_train.cpp (models/gpt_tiny.cfg at 2 layers, 32 dims, context 32, 12 steps
// on synthetic windows) keeps that test's bounds on MKL, its losses follow oneDNN's within f32
// rounding of the products, and the same seed on MKL repeats them bit for bit (same thread count).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "launch/train_session.h"
#include "runtime/config.h"
#include "tests/mkl_test.h"

namespace dp::launch {
namespace {

const std::string kGptTiny = std::string(DPTRAIN_SOURCE_DIR) + "/models/gpt_tiny.cfg";

struct Root {
  std::string path;
  Root() {
    path = (std::filesystem::temp_directory_path() / ("dptrain_mkl_gpt_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Root() { std::filesystem::remove_all(path); }
};

Config tiny(const std::string& dir, const std::string& name, const std::string& gemm) {
  return load_config(kGptTiny, {"data.dataset=synthetic", "data.synthetic_train=96", "data.synthetic_eval=32",
                                "model.n_layer=2", "model.n_head=2", "model.n_embd=32", "model.block_size=32",
                                "train.batch_size=8", "train.steps=12", "train.warmup_steps=2", "train.eval_every=0",
                                "train.log_every=1", "run.log_level=warn", "run.tensorboard=false",
                                "run.dir=\"" + dir + "\"", "run.name=" + name, "checkpoint.final=false",
                                "train.cpu_backend=onednn", "train.cpu_gemm=" + gemm});
}

std::vector<double> train_losses(const std::string& run) {
  std::vector<double> out;
  std::ifstream f(run + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("split", "") == "train") out.push_back(j["loss"].get<double>());
  }
  return out;
}

TEST(MklGptTrain, TinyGptKeepsItsBoundsFollowsOnednnAndRepeats) {
  DP_SKIP_WITHOUT_MKL();
  Root r;
  const TrainResult a = train(tiny(r.path, "a", "mkl")), b = train(tiny(r.path, "b", "mkl"));
  const TrainResult o = train(tiny(r.path, "o", "onednn"));
  const double ln_v = std::log(256.0);
  ASSERT_EQ(a.steps, 12);
  ASSERT_TRUE(std::isfinite(a.final_eval.loss));
  EXPECT_GT(a.final_eval.loss, ln_v - 0.02);
  EXPECT_LT(a.final_eval.loss, ln_v + 0.1);
  const auto la = train_losses(a.run_dir), lb = train_losses(b.run_dir), lo = train_losses(o.run_dir);
  ASSERT_EQ(la.size(), 12u);
  ASSERT_EQ(lb.size(), la.size());
  ASSERT_EQ(lo.size(), la.size());
  for (size_t i = 0; i < la.size(); ++i) {
    EXPECT_EQ(la[i], lb[i]) << "step " << i + 1 << ": MKL did not repeat itself";
    EXPECT_NEAR(la[i], lo[i], 1e-4 * lo[i]) << "step " << i + 1 << ": MKL against oneDNN";
  }
  EXPECT_EQ(a.final_eval.loss, b.final_eval.loss);
  EXPECT_NEAR(a.final_eval.loss, o.final_eval.loss, 1e-4 * o.final_eval.loss);
}

}  // namespace
}  // namespace dp::launch
