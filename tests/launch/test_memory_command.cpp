// dptrain memory (launch/memory_command.h, launch/memory_estimate.h): the JSON's exact keys, the
// categories summing to the peak, the parameters and optimizer state of a known model, the
// --max-batch bisection against a known device memory, the does-not-fit message, ZeRO's shard,
// and a bad cfg's error being training's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launch/memory_command.h"
#include "launch/memory_estimate.h"
#include "models/build.h"
#include "tests/launch/cli_capture.h"

namespace dp::launch {
namespace {

using testcli::dptrain_cli;

const std::string kMlp = std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_mlp.cfg";
const std::string kCnn = std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg";
const std::string kGptTiny = std::string(DPTRAIN_SOURCE_DIR) + "/models/gpt_tiny.cfg";
// The MLP 784-512-256-10: weights and biases.
constexpr size_t kMlpParams = 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10;

// On the CPU whatever the machine has ("auto" would plan its GPU), unless a test sets it.
const std::string kCpu = "train.device=\"cpu\"";

nlohmann::json memory_json(std::vector<std::string> args) {
  args.insert(args.begin(), "memory");
  args.push_back("--json");
  const testcli::Outcome o = dptrain_cli(args);
  EXPECT_EQ(o.code, 0) << o.err;
  return nlohmann::json::parse(o.out);
}

std::vector<std::string> keys_of(const nlohmann::json& j) {
  std::vector<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.push_back(it.key());
  std::sort(k.begin(), k.end());
  return k;
}

TEST(MemoryCommand, JsonHasExactlyTheIssuesKeys) {
  const nlohmann::json j = memory_json({kMlp, "--set", kCpu});
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{"batch_size", "categories", "device", "largest", "peak_bytes",
                                                  "precision", "world"}));
  EXPECT_EQ(keys_of(j["categories"]),
            (std::vector<std::string>{"activations", "buckets", "gradients", "input", "master_weights",
                                      "optimizer_state", "other", "parameters", "workspace"}));
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["batch_size"], 128);
  EXPECT_EQ(j["world"], 1);
  ASSERT_FALSE(j["largest"].empty());
  EXPECT_LE(j["largest"].size(), 10u);
  for (const auto& t : j["largest"]) EXPECT_EQ(keys_of(t), (std::vector<std::string>{"bytes", "layer", "name"}));
  EXPECT_GE(j["largest"][0]["bytes"].get<size_t>(), j["largest"].back()["bytes"].get<size_t>());
}

size_t sum_of(const nlohmann::json& categories) {
  size_t s = 0;
  for (const auto& c : categories) s += c.get<size_t>();
  return s;
}

TEST(MemoryCommand, CategoriesSumToThePeakAndTheParametersAreTheModels) {
  const nlohmann::json cpu = memory_json({kMlp, "--set", kCpu});
  EXPECT_EQ(sum_of(cpu["categories"]), cpu["peak_bytes"].get<size_t>());
  EXPECT_EQ(cpu["categories"]["parameters"], kMlpParams * 4);
  EXPECT_EQ(cpu["categories"]["gradients"], kMlpParams * 4);
  EXPECT_EQ(cpu["categories"]["optimizer_state"], kMlpParams * 8);  // AdamW: two moments
  EXPECT_EQ(cpu["categories"]["master_weights"], 0);
  EXPECT_EQ(cpu["categories"]["workspace"], 0);
  // The loader's host batches a CPU step holds (launch/batch_feed.h feed_host_batches: 3
  // prefetched, Fashion-MNIST's one worker, and the step's own): 4 x 128 x (784 f32 + an i32 label).
  EXPECT_EQ(cpu["categories"]["input"], 4u * 128 * (784 * 4 + 4));
  // Token windows: i32 inputs and targets, 4 x 32 x 128 x 2 x 4.
  EXPECT_EQ(memory_json({kGptTiny, "--set", kCpu})["categories"]["input"], 4u * 32 * 128 * 2 * 4);
  // A CUDA bf16 run planned here: 16-bit parameters, fp32 masters, both gradients, the workspace cap.
  const nlohmann::json gpu =
      memory_json({kCnn, "--set", "train.device=\"cuda\"", "train.precision=\"bf16\"", "train.workspace_mb=64"});
  EXPECT_EQ(gpu["device"], "cuda:0");
  EXPECT_EQ(gpu["precision"], "bf16");
  EXPECT_EQ(sum_of(gpu["categories"]), gpu["peak_bytes"].get<size_t>());
  EXPECT_EQ(gpu["categories"]["workspace"], 64u << 20);
  const size_t P = gpu["categories"]["master_weights"].get<size_t>() / 4;
  EXPECT_EQ(gpu["categories"]["gradients"], P * 6);
  EXPECT_GT(gpu["categories"]["activations"].get<size_t>(), 0u);
}

// cuDNN's deterministic attention backward needs a workspace that grows with the batch (dP, N H T T
// 16-bit values, and the rows' softmax sums: runtime/cuda/graph_plan_key.h): the plan reserves
// that need where it is above train.workspace_mb (the engines are not capped below it: they are
// the only ones dptrain runs), the cap otherwise; the own kernel (f32, attention dropout) needs none.
TEST(MemoryCommand, TheAttentionBackwardsWorkspaceIsPlannedAtItsNeedAboveTheCap) {
  const auto workspace = [](const std::string& precision, const std::string& dropout, int mb) {
    return memory_json({kGptTiny, "--set", "train.device=\"cuda\"", "train.precision=\"" + precision + "\"",
                        "model.dropout=" + dropout, "train.workspace_mb=" + std::to_string(mb)})["categories"]
                      ["workspace"]
        .get<size_t>();
  };
  constexpr size_t kNeed = 32 * 4 * 128 * 128 * 2 + 32 * 4 * 128 * 4;  // batch 32, 4 heads, 128 tokens
  EXPECT_EQ(workspace("bf16", "0", 1), kNeed);
  EXPECT_EQ(workspace("bf16", "0", 8), 8u << 20);
  EXPECT_EQ(workspace("fp32", "0", 1), 1u << 20);
  EXPECT_EQ(workspace("bf16", "0.1", 1), 1u << 20);
}

TEST(MemoryCommand, ZeroOneShardsTheOptimizerStateOverTheWorld) {
  const nlohmann::json one = memory_json({kMlp, "--set", kCpu, "train.zero=1"});
  const nlohmann::json four = memory_json({kMlp, "--set", kCpu, "train.zero=1", "--world", "4"});
  EXPECT_EQ(one["categories"]["optimizer_state"], kMlpParams * 8);
  const size_t shard = four["categories"]["optimizer_state"].get<size_t>() / 8;
  EXPECT_GE(shard, (kMlpParams + 3) / 4);
  EXPECT_LE(shard, kMlpParams / 4 + 8);  // give or take one element per bucket
  EXPECT_EQ(four["world"], 4);
}

TEST(MemoryCommand, MaxBatchIsTheLargestThatFitsAKnownMemory) {
  const Config cfg = load_config(kMlp, {kCpu});
  auto g = models::build_model(cfg.model, planned_sample_shape(cfg), 0);
  const size_t at300 = estimate_memory(cfg, *g, 300, 1).peak;
  ASSERT_LT(at300, estimate_memory(cfg, *g, 301, 1).peak);
  const testcli::Outcome o =
      dptrain_cli({"memory", kMlp, "--max-batch", "--json", "--device-memory", std::to_string(at300), "--set", kCpu});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "{\"max_batch\": 300, \"peak_bytes\": " + std::to_string(at300) + ", \"device_memory\": " +
                       std::to_string(at300) + "}\n");
}

TEST(MemoryCommand, MaxBatchBisection) {
  auto peak = [](int64_t b) { return size_t{1000} + 7 * static_cast<size_t>(b); };
  EXPECT_EQ(max_batch_that_fits(peak, 5000, 1 << 20), 571);
  EXPECT_EQ(max_batch_that_fits(peak, 5000, 100), 100);
  EXPECT_EQ(max_batch_that_fits(peak, 1007, 1 << 20), 1);
  EXPECT_EQ(max_batch_that_fits(peak, 1006, 1 << 20), 0);
}

TEST(MemoryCommand, AModelThatDoesNotFitAtBatchOneSaysSoAndNamesTheLargestCategory) {
  const testcli::Outcome o = dptrain_cli({"memory", kMlp, "--max-batch", "--device-memory", "1MiB", "--set", kCpu});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("does not fit in 1048576 bytes (1.0 MiB) even at batch 1"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("the largest category optimizer_state with " + std::to_string(kMlpParams * 8) + " bytes"),
            std::string::npos)
      << o.err;
}

TEST(MemoryCommand, ABadCfgGivesTrainingsError) {
  const testcli::Outcome mem = dptrain_cli({"memory", kMlp, "--set", "train.optimizer=\"adam9\""});
  const testcli::Outcome train = dptrain_cli({kMlp, "--check", "--set", "train.optimizer=\"adam9\""});
  EXPECT_EQ(mem.code, 2);
  EXPECT_EQ(train.code, 2);
  EXPECT_FALSE(mem.err.empty());
  EXPECT_EQ(mem.err, train.err);
}

TEST(MemoryCommand, MemorySizes) {
  EXPECT_EQ(parse_memory_size("80GiB", "--device-memory"), size_t{80} << 30);
  EXPECT_EQ(parse_memory_size("141GB", "--device-memory"), size_t{141'000'000'000});
  EXPECT_EQ(parse_memory_size("512 MiB", "--device-memory"), size_t{512} << 20);
  EXPECT_EQ(parse_memory_size("1024", "--device-memory"), 1024u);
  try {
    parse_memory_size("80 parsecs", "--device-memory");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "--device-memory 80 parsecs: not a memory size; give a number and a unit, e.g. 80GiB, "
                           "141GB or 81920MiB");
  }
}

}  // namespace
}  // namespace dp::launch
