#include "launch/memory_vs_plan.h"

#include <fmt/format.h>

namespace dp::launch {
namespace {
double mib(size_t b) { return static_cast<double>(b) / 1048576.0; }
}  // namespace

std::array<size_t, kPlannedCategories> measured_by_planned_category(const MemoryBreakdown& b, size_t master_bytes,
                                                                    bool cuda) {
  const auto live = [&](MemoryCategory c) { return b.live[static_cast<size_t>(c)]; };
  std::array<size_t, kPlannedCategories> m{};
  const auto set = [&](PlannedCategory c, size_t v) { m[static_cast<size_t>(c)] = v; };
  set(PlannedCategory::Parameters, live(MemoryCategory::Parameters) + live(MemoryCategory::ComputeParams) - master_bytes);
  set(PlannedCategory::MasterWeights, master_bytes);
  set(PlannedCategory::Gradients, live(MemoryCategory::Gradients) + live(MemoryCategory::ComputeGrads));
  set(PlannedCategory::OptimizerState, live(MemoryCategory::OptimizerState));
  set(PlannedCategory::Activations, live(MemoryCategory::Activations) + live(MemoryCategory::InputGradients) +
                                        live(MemoryCategory::LayerState));
  set(PlannedCategory::Workspace, kNotMeasured);
  set(PlannedCategory::Buckets, kNotMeasured);
  set(PlannedCategory::Input, cuda ? kNotMeasured : live(MemoryCategory::Input));
  set(PlannedCategory::Other, live(MemoryCategory::Other));
  return m;
}

std::string memory_vs_plan_table(const MemoryEstimate& planned, const std::array<size_t, kPlannedCategories>& measured) {
  std::string s;
  size_t sum_planned = 0, sum_measured = 0;
  for (int c = 0; c < kPlannedCategories; ++c) {
    const size_t p = planned.bytes[static_cast<size_t>(c)], m = measured[static_cast<size_t>(c)];
    sum_planned += p;
    const std::string right = m == kNotMeasured ? std::string("measured -")
                                                : fmt::format("measured {:>14} ({:>9.1f} MiB)", m, mib(m));
    if (m != kNotMeasured) sum_measured += m;
    s += fmt::format("  {:<16} planned {:>14} ({:>9.1f} MiB)  {}\n", planned_category_name(static_cast<PlannedCategory>(c)),
                     p, mib(p), right);
  }
  s += fmt::format("  {:<16} planned {:>14} ({:>9.1f} MiB)  measured {:>14} ({:>9.1f} MiB)\n", "total", sum_planned,
                   mib(sum_planned), sum_measured, mib(sum_measured));
  return s;
}

}  // namespace dp::launch
