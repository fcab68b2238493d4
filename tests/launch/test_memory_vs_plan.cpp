// The log's planned-beside-measured memory table (launch/memory_vs_plan.h): the account's
// categories gathered into the plan's, the exact line of one category, and a CPU run's log: its
// planned row is `dptrain memory`'s and its measured row the account's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "launch/memory_vs_plan.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

MemoryBreakdown breakdown() {
  MemoryBreakdown b;
  b.live[static_cast<size_t>(MemoryCategory::Parameters)] = 4000 + 64;  // fp32 arena + buffers
  b.live[static_cast<size_t>(MemoryCategory::ComputeParams)] = 2000;
  b.live[static_cast<size_t>(MemoryCategory::Gradients)] = 4000;
  b.live[static_cast<size_t>(MemoryCategory::ComputeGrads)] = 2000;
  b.live[static_cast<size_t>(MemoryCategory::OptimizerState)] = 8000;
  b.live[static_cast<size_t>(MemoryCategory::Activations)] = 3 << 20;
  b.live[static_cast<size_t>(MemoryCategory::InputGradients)] = 1 << 20;
  b.live[static_cast<size_t>(MemoryCategory::LayerState)] = 512;
  b.live[static_cast<size_t>(MemoryCategory::Input)] = 4096;
  b.live[static_cast<size_t>(MemoryCategory::Other)] = 7;
  return b;
}

TEST(MemoryVsPlan, TheAccountInThePlansCategories) {
  const auto m = measured_by_planned_category(breakdown(), 4000, false);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Parameters)], 2064u);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::MasterWeights)], 4000u);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Gradients)], 6000u);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::OptimizerState)], 8000u);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Activations)], (4u << 20) + 512);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Workspace)], kNotMeasured);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Buckets)], kNotMeasured);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Input)], 4096u);  // the loader's host batches
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Other)], 7u);
  // On a GPU the plan's input is the device's slots, not the host batches the account holds.
  const auto gpu = measured_by_planned_category(breakdown(), 4000, true);
  EXPECT_EQ(gpu[static_cast<size_t>(PlannedCategory::Input)], kNotMeasured);
  EXPECT_EQ(gpu[static_cast<size_t>(PlannedCategory::Other)], 7u);
}

TEST(MemoryVsPlan, OneLinePerCategoryPlannedThenMeasured) {
  MemoryEstimate e;
  e.bytes[static_cast<size_t>(PlannedCategory::Activations)] = 5u << 20;
  e.bytes[static_cast<size_t>(PlannedCategory::Input)] = 1024;
  const std::string t = memory_vs_plan_table(e, measured_by_planned_category(breakdown(), 0, false));
  EXPECT_NE(t.find("\n  activations      planned        5242880 (      5.0 MiB)  measured        4194816 (      4.0 MiB)\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\n  input            planned           1024 (      0.0 MiB)  measured           4096 (      0.0 MiB)\n"),
            std::string::npos)
      << t;
  const std::string gpu = memory_vs_plan_table(e, measured_by_planned_category(breakdown(), 0, true));
  EXPECT_NE(gpu.find("\n  input            planned           1024 (      0.0 MiB)  measured -\n"), std::string::npos) << gpu;
}

// A 2-step CPU run of the Fashion-MNIST CNN: the table after step 1 plans what `dptrain memory`
// plans for the same cfg, and measures the account's activation rows (the step arena, the input
// gradients, the layers' own tensors) and its input row: the loader's host batches, planned
// exactly, 4 of 16 x (784 f32 + an i32 label) = 50,240 bytes (launch/batch_feed.h
// feed_host_batches: the 3 it prefetches and the step's own; the epoch's 4 batches are all of them,
// made by the one worker while step 1 runs).
TEST(MemoryVsPlan, ACpuRunLogsDptrainMemorysPlanBesideTheAccount) {
  namespace fs = std::filesystem;
  const std::string bin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain", src = DPTRAIN_SOURCE_DIR;
  const std::string root = (fs::temp_directory_path() / ("dptrain_memory_vs_plan_" + std::to_string(::getpid()))).string();
  const std::string sets = src + "/models/fmnist_cnn.cfg --set train.device=cpu --set train.batch_size=16"
                           " --set data.dataset=synthetic --set data.synthetic_shape=[1,28,28]"
                           " --set data.synthetic_train=64 --set data.synthetic_eval=16";
  ASSERT_EQ(std::system((bin + " memory " + sets + " --json > " + root + ".json 2>&1").c_str()), 0);
  const nlohmann::json plan = nlohmann::json::parse(testutil::read_file(root + ".json"), nullptr, false);
  fs::remove(root + ".json");
  ASSERT_FALSE(plan.is_discarded());
  const std::string run = bin + " " + sets + " --set train.steps=2 --set train.warmup_steps=0 --set train.eval_every=0"
                          " --set run.tensorboard=false --set checkpoint.final=false --set run.name=m --run-dir " +
                          root + " > " + root + ".log 2>&1";
  ASSERT_EQ(std::system(run.c_str()), 0) << testutil::read_file(root + ".log");
  const std::string log = testutil::read_file(root + "/m/logs/rank-0.log");
  fs::remove_all(root);
  fs::remove(root + ".log");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      log, m, std::regex(R"(\n  activations      planned +(\d+) \( +[0-9.]+ MiB\)  measured +(\d+) \( +[0-9.]+ MiB\)\n)")))
      << log;
  EXPECT_EQ(std::stoll(m[1]), plan["categories"]["activations"].get<int64_t>());
  auto row = [&](const char* name) {  // the account's table
    std::smatch r;
    return std::regex_search(log, r, std::regex(std::string("\n") + name + " +(\\d+) ")) ? std::stoll(r[1]) : -1;
  };
  EXPECT_EQ(std::stoll(m[2]), row("activations") + row("input_gradients") + row("layer_state"));
  EXPECT_GT(row("activations"), 0);
  constexpr int64_t kInput = 4 * 16 * (784 * 4 + 4);
  EXPECT_EQ(plan["categories"]["input"].get<int64_t>(), kInput);
  std::smatch in;
  ASSERT_TRUE(std::regex_search(
      log, in, std::regex(R"(\n  input            planned +(\d+) \( +[0-9.]+ MiB\)  measured +(\d+) \( +[0-9.]+ MiB\)\n)")))
      << log;
  EXPECT_EQ(std::stoll(in[1]), kInput);
  EXPECT_EQ(std::stoll(in[2]), kInput);
  EXPECT_EQ(row("input"), kInput);
}

}  // namespace
}  // namespace dp::launch
