// The log's planned-beside-measured memory table (launch/memory_vs_plan.h): the account's
// categories gathered into the plan's, and the exact line of one category.
#include <gtest/gtest.h>

#include "launch/memory_vs_plan.h"

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
  b.live[static_cast<size_t>(MemoryCategory::Other)] = 7;
  return b;
}

TEST(MemoryVsPlan, TheAccountInThePlansCategories) {
  const auto m = measured_by_planned_category(breakdown(), 4000);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Parameters)], 2064u);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::MasterWeights)], 4000u);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Gradients)], 6000u);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::OptimizerState)], 8000u);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Activations)], (4u << 20) + 512);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Workspace)], kNotMeasured);
  EXPECT_EQ(m[static_cast<size_t>(PlannedCategory::Other)], 7u);
}

TEST(MemoryVsPlan, OneLinePerCategoryPlannedThenMeasured) {
  MemoryEstimate e;
  e.bytes[static_cast<size_t>(PlannedCategory::Activations)] = 5u << 20;
  e.bytes[static_cast<size_t>(PlannedCategory::Input)] = 1024;
  const std::string t = memory_vs_plan_table(e, measured_by_planned_category(breakdown(), 0));
  EXPECT_NE(t.find("\n  activations      planned        5242880 (      5.0 MiB)  measured        4194816 (      4.0 MiB)\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\n  input            planned           1024 (      0.0 MiB)  measured -\n"), std::string::npos) << t;
}

}  // namespace
}  // namespace dp::launch
