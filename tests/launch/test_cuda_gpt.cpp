// A GPT model (the gpt2 preset at a small size: 2 layers, 2 heads, 32 dims so head dim 16, block
// 32, bytes) trained on the GPU against the same run on the CPU, through the real trainer on
// byte-level token shards: in f32 the GPU's losses follow the CPU's step for step (the own
// attention kernel; the arithmetic differs in rounding order only); in bf16 and f16 (the
// attention core on cuDNN's fused attention) the evaluation loss lands within 0.05 nats of the
// CPU's; with attention and residual dropout (the own kernel, the CPU's masks) f32 follows the CPU
// too; with train.gpu_fusion (the MLP's GELU in cuBLASLt's epilogue) as well. Skips without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "launch/train_session.h"
#include "runtime/config.h"
#include "runtime/data/byte_shards.h"
#include "tests/gpu_test.h"

namespace dp::launch {
namespace {

struct Root {
  std::string path;
  explicit Root(const std::string& tag) {
    path = (std::filesystem::temp_directory_path() / ("dptrain_cuda_gpt_" + tag + "_" + std::to_string(::getpid())))
               .string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
    std::string text;
    const char* words[] = {"the quick brown fox", "jumps over", "the lazy dog", "and the cat", "sleeps in the sun"};
    for (int i = 0; i < 600; ++i) text += std::string(words[i % 5]) + (i % 7 == 0 ? ".\n" : " ");
    std::ofstream(path + "/text.txt") << text;
    data::make_byte_shards(path + "/text.txt", path + "/shards", {.val_fraction = 0.1, .shard_tokens = 100000});
  }
  ~Root() { std::filesystem::remove_all(path); }
};

struct Losses {
  std::vector<double> train;  // every logged step's loss
  double eval = NAN;          // the last evaluation's
};

// extra: more [train] lines.
Losses run(const Root& r, const std::string& name, const std::string& device, const std::string& precision,
           double dropout = 0.0, const std::string& extra = "") {
  const std::string cfg =
      "[run]\nname = \"" + name + "\"\ndir = \"" + r.path + "\"\nseed = 5\nlog_level = \"warn\"\ntensorboard = false\n"
      "[data]\ndataset = \"tokens\"\npath = \"" + r.path + "/shards/train_*.bin\"\nval_path = \"" + r.path +
      "/shards/val_*.bin\"\n"
      "[model]\npreset = \"gpt2\"\nn_layer = 2\nn_head = 2\nn_embd = 32\nblock_size = 32\nvocab_size = 256\n"
      "dropout = " + std::to_string(dropout) + "\n"
      "[train]\noptimizer = \"adamw\"\nlr = 0.003\nbatch_size = 8\nsteps = 40\nlog_every = 1\neval_every = 40\n"
      "grad_clip = 1.0\ndecay_params = \"matrices\"\nweight_decay = 0.1\n"
      "device = \"" + device + "\"\nprecision = \"" + precision + "\"\n" + extra;
  train(parse_config(cfg, name + ".cfg", {}));
  Losses out;
  std::ifstream f(r.path + "/" + name + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line);
    const std::string split = j.value("split", "");
    if (split == "train" && j.contains("loss")) out.train.push_back(j["loss"].get<double>());
    if (split == "eval") out.eval = j["loss"].get<double>();
  }
  return out;
}

DP_GPU_TEST(GptTrainGpu, Fp32LossesFollowTheCpuStepForStep) {
  Root r("f32");
  const Losses cpu = run(r, "cpu", "cpu", "fp32"), gpu = run(r, "gpu", "cuda", "fp32");
  ASSERT_EQ(gpu.train.size(), cpu.train.size());
  ASSERT_GE(cpu.train.size(), 40u);
  double worst = 0;
  for (size_t i = 0; i < cpu.train.size(); ++i) worst = std::max(worst, std::fabs(gpu.train[i] - cpu.train[i]));
  RecordProperty("max_loss_diff", std::to_string(worst));
  EXPECT_LT(worst, 2e-3) << "GPU f32 training losses against the CPU's over 40 steps";
  EXPECT_LT(std::fabs(gpu.eval - cpu.eval), 2e-3);
  EXPECT_LT(cpu.eval, cpu.train.front() - 1.0) << "the run learns (ln 256 = 5.55 at the start)";
}

DP_GPU_TEST(GptTrainGpu, Bf16AndF16EvaluationLossWithinAFewHundredthsOfTheCpu) {
  Root r("amp");
  const Losses cpu = run(r, "cpu", "cpu", "fp32");
  for (const char* p : {"bf16", "fp16"}) {
    const Losses gpu = run(r, std::string("gpu_") + p, "cuda", p);
    RecordProperty(std::string("eval_") + p, std::to_string(gpu.eval));
    EXPECT_LT(std::fabs(gpu.eval - cpu.eval), 0.05) << p << ": GPU " << gpu.eval << ", CPU " << cpu.eval;
  }
}

DP_GPU_TEST(GptTrainGpu, Fp32WithDropoutFollowsTheCpuMasks) {
  Root r("drop");
  const Losses cpu = run(r, "cpu", "cpu", "fp32", 0.1), gpu = run(r, "gpu", "cuda", "fp32", 0.1);
  ASSERT_EQ(gpu.train.size(), cpu.train.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.train.size(); ++i) worst = std::max(worst, std::fabs(gpu.train[i] - cpu.train[i]));
  EXPECT_LT(worst, 2e-3) << "the same dropout masks on both: the losses follow";
}

// train.gpu_fusion: each MLP's GELU folded into its c_fc (cuBLASLt's GELU epilogue forward, the
// kept input turned into the gradient backward): f32 still follows the CPU step for step, bf16
// lands where the unfused run does.
DP_GPU_TEST(GptTrainGpu, FoldedGeluFollowsTheCpu) {
  Root r("fused");
  const Losses cpu = run(r, "cpu", "cpu", "fp32");
  const Losses gpu = run(r, "gpu", "cuda", "fp32", 0.0, "gpu_fusion = true\n");
  ASSERT_EQ(gpu.train.size(), cpu.train.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.train.size(); ++i) worst = std::max(worst, std::fabs(gpu.train[i] - cpu.train[i]));
  RecordProperty("max_loss_diff", std::to_string(worst));
  EXPECT_LT(worst, 2e-3) << "GPU f32 with the folded GELU against the CPU over 40 steps";
  const Losses bf16 = run(r, "gpu_bf16", "cuda", "bf16", 0.0, "gpu_fusion = true\n");
  EXPECT_LT(std::fabs(bf16.eval - cpu.eval), 0.05) << "bf16 fused: GPU " << bf16.eval << ", CPU " << cpu.eval;
}

}  // namespace
}  // namespace dp::launch
