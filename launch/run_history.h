// defines: what a run directory keeps of its earlier attempts: on a start-over (--reset,
// checkpoint.resume = false) set_aside_earlier_run moves the earlier run's metrics, event files,
// trace, final weights and replicas into <run>/before-reset-<time>/ (moved, never deleted: a
// --reset typed by mistake loses nothing), so the new run starts clean files; on a resume
// trim_metrics drops the metrics.jsonl lines of the steps the resumed run redoes (those after its
// checkpoint) and says whether the checkpoint's step was evaluated already, so that nothing is
// written twice.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "launch/run_dir.h"

namespace dp::launch {

// Pure. The lines of metrics.jsonl text to keep for a resume from `step`: every line whose "step"
// is at most `step` (and every line without one, or that is not JSON: not ours to judge), in order,
// each ending in '\n'.
struct MetricsTrim {
  std::string kept;
  int64_t dropped = 0;        // lines of steps after `step`
  bool eval_at_step = false;  // an eval line at `step` is among the kept ones
};
MetricsTrim trim_metrics(const std::string& text, int64_t step);

// Rank 0, resuming from `step`: rewrites <run>/metrics.jsonl (atomically) as trim_metrics says,
// before the run appends to it. A run directory without the file gives an empty trim.
MetricsTrim trim_metrics_file(const RunDir& run, int64_t step);

// Pure. "before-reset-20250301-142233".
std::string set_aside_folder_name(std::time_t t);

// Rank 0, starting over: moves the earlier run's metrics.jsonl, events.out.tfevents.*, trace.json,
// final.safetensors and replicas/ into <run>/<set_aside_folder_name(now)>/ (".2", ".3" when taken).
// Returns the folder and the names moved; folder "" when there was nothing to move.
struct SetAside {
  std::string folder;
  std::vector<std::string> moved;
};
SetAside set_aside_earlier_run(const RunDir& run, std::time_t now);

}  // namespace dp::launch
