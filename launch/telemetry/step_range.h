// defines: StepRange and parse_step_range, the "A-B" step windows of profile.steps (Nsight
// capture range) and profile.trace_steps (trace.json).
#pragma once
#include <cstdint>
#include <string>

namespace dp::metrics {

struct StepRange {
  int64_t first = 0, last = -1;  // inclusive; empty when last < first (the default: off)
  bool empty() const { return last < first; }
  bool contains(int64_t step) const { return step >= first && step <= last; }
};

// "A-B" (1 <= A <= B; spaces allowed around the numbers), "A" (one step) or "" (empty: off).
// Steps count from 1, as the progress line and metrics.jsonl do. `key` names the setting in the
// UserError:  profile.trace_steps = "5-x": expected "A-B" with whole steps 1 <= A <= B (e.g. "100-110"), or "" for off
StepRange parse_step_range(const std::string& text, const std::string& key);

}  // namespace dp::metrics
