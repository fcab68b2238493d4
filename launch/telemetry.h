// defines: Telemetry, what a training run reports besides its log lines: rank 0's TensorBoard
// scalars and console progress, every rank's Chrome trace for the profile.trace_steps window
// (gathered into <run>/trace.json by rank 0), and the communication overlap summary (how much
// all-reduce time backward hid).
//
// The training loop marks each step's phases with steady-clock time points; Telemetry turns
// them into trace events and overlap numbers only when asked, so outside the trace window a
// step costs a few vector pushes.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/bootstrap/bootstrap.h"
#include "collectives/reducer/reducer.h"
#include "launch/run_dir.h"
#include "runtime/config.h"
#include "runtime/metrics/comm_overlap.h"
#include "runtime/metrics/progress.h"
#include "runtime/metrics/step_range.h"
#include "runtime/metrics/tensorboard_writer.h"
#include "runtime/metrics/trace.h"

namespace dp::launch {

class Telemetry {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // tb_dir: rank 0's TensorBoard directory ("" = none). Throws UserError for a bad
  // profile.trace_steps.
  Telemetry(const Config& cfg, int rank, const std::string& tb_dir);

  // One step (1-based `step`, the number the progress line shows): its phases in order.
  void begin_step(int64_t step);
  void phase(const char* name, TimePoint begin, TimePoint end);  // "data", "forward", "backward", "optimizer"
  void comm(const ReducerStepTimes& times);                       // the step's bucket all-reduces
  void end_step();

  // Rank 0: scalars into the event file at `step`.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // Rank 0: the console progress line (a no-op on other ranks and below log level info).
  void progress(const metrics::ProgressState& state, bool force);
  // Ends a terminal progress line before other console output.
  void end_progress_line();

  // End of the run (every rank, collectively): gathers the trace fragments to rank 0, which
  // writes <run>/trace.json; returns the overlap summary line ("" with one rank).
  std::string finish(Bootstrap& boot, const RunDir& run);

  const metrics::OverlapSummary& overlap() const { return overlap_; }

 private:
  double trace_us(TimePoint t) const;
  int rank_;
  bool console_;
  metrics::StepRange window_;
  metrics::TraceRecorder trace_;
  std::unique_ptr<metrics::TbWriter> tb_;
  std::unique_ptr<metrics::ProgressPrinter> printer_;
  metrics::OverlapSummary overlap_;
  metrics::StepTimeline current_;
  int64_t step_ = 0;
  bool any_comm_ = false;
  // Anchor between the steady clock and the trace's microseconds.
  TimePoint anchor_steady_;
  double anchor_us_ = 0;
};

}  // namespace dp::launch
