#include "launch/telemetry/comm_overlap.h"

#include <fmt/format.h>

#include <algorithm>

namespace dp::metrics {
namespace {

// Sorted, disjoint, non-empty intervals covering the same points as `v`.
std::vector<Interval> merged(std::vector<Interval> v) {
  std::erase_if(v, [](const Interval& i) { return !(i.end_us > i.begin_us); });
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.begin_us < b.begin_us; });
  std::vector<Interval> out;
  for (const auto& i : v) {
    if (!out.empty() && i.begin_us <= out.back().end_us) out.back().end_us = std::max(out.back().end_us, i.end_us);
    else out.push_back(i);
  }
  return out;
}

double length(const std::vector<Interval>& disjoint) {
  double t = 0;
  for (const auto& i : disjoint) t += i.end_us - i.begin_us;
  return t;
}

// Length of the intersection of two sorted disjoint sets (a merge walk).
double intersection(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double t = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].begin_us, b[j].begin_us), hi = std::min(a[i].end_us, b[j].end_us);
    if (hi > lo) t += hi - lo;
    if (a[i].end_us < b[j].end_us) ++i;
    else ++j;
  }
  return t;
}

}  // namespace

OverlapSummary& OverlapSummary::operator+=(const OverlapSummary& o) {
  steps += o.steps;
  compute_us += o.compute_us;
  comm_us += o.comm_us;
  hidden_us += o.hidden_us;
  exposed_us += o.exposed_us;
  return *this;
}

OverlapSummary step_overlap(const StepTimeline& step) {
  const auto compute = merged(step.compute), comm = merged(step.comm);
  OverlapSummary s;
  s.steps = 1;
  s.compute_us = length(compute);
  s.comm_us = length(comm);
  s.hidden_us = intersection(comm, compute);
  s.exposed_us = s.comm_us - s.hidden_us;
  return s;
}

OverlapSummary summarise_overlap(const std::vector<StepTimeline>& steps) {
  OverlapSummary total;
  for (const auto& st : steps) total += step_overlap(st);
  return total;
}

std::string format_overlap(const OverlapSummary& s) {
  const char* steps = s.steps == 1 ? "step" : "steps";
  if (s.comm_us <= 0) return fmt::format("communication over {} {}: none", s.steps, steps);
  const double per = 1e-3 / static_cast<double>(std::max<int64_t>(s.steps, 1));  // us total -> ms per step
  return fmt::format(
      "communication over {} {}: {:.3f} ms/step, {:.3f} hidden behind compute ({:.1f}%), {:.3f} exposed; "
      "compute {:.3f} ms/step",
      s.steps, steps, s.comm_us * per, s.hidden_us * per, 100.0 * s.hidden_us / s.comm_us, s.exposed_us * per,
      s.compute_us * per);
}

}  // namespace dp::metrics
