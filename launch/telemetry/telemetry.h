// defines: Telemetry, what a training run reports as it goes: the train lines (the log window of
// the steps since the last one: console progress after every step; every train.log_every steps
// the log line, rank 0's TensorBoard scalars and metrics.jsonl line), every rank's Chrome trace
// for the profile.trace_steps window (gathered into <run>/trace.json by rank 0; the per-layer
// profile's spans are its "device" lane), and the communication overlap summary (how much
// all-reduce time backward hid). Also StepTally, StepPosition and LogWindow (the window's sums),
// and hms (the log lines' durations).
//
// The training loop marks each step's phases with steady-clock time points; Telemetry turns
// them into trace events and overlap numbers only when asked, so outside the trace window a
// step costs a few vector pushes.
#pragma once
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/bootstrap/bootstrap.h"
#include "collectives/reducer/reducer.h"
#include "collectives/straggler.h"
#include "launch/run_dir.h"
#include "runtime/config.h"
#include "launch/telemetry/comm_overlap.h"
#include "launch/telemetry/layer_profile.h"
#include "launch/telemetry/progress.h"
#include "launch/telemetry/step_range.h"
#include "launch/telemetry/tensorboard_writer.h"
#include "launch/telemetry/trace.h"

namespace dp::launch {

// "1h02m", "3m05s", "42s" (rounded to the nearest second; "?" when negative or not finite).
std::string hms(double seconds);

// What one finished step adds to the log window: this rank's numbers.
struct StepTally {
  double loss = 0;       // mean over the step's samples
  int64_t samples = 0;   // this rank's samples of the step
  int64_t top1 = 0;      // top-1 hits among its scored positions
  int64_t positions = 0; // scored positions: the samples, or samples x T for token windows
  double step_s = 0;     // the step's wall time
  double comm_s = 0;     // its gradient all-reduces' time on the wire (0 with one rank)
  double exposed_s = 0;  // the part of comm_s that backward did not hide
  double data_s = 0;     // its waits for the next batch (the data-loading stall)
  double grad_norm = std::numeric_limits<double>::quiet_NaN();  // before clipping (train.grad_clip); NaN: not measured
};

// Where the run is after a step, and what its train line shows besides the window's means.
struct StepPosition {
  int64_t epoch = 0;  // the epoch in progress, 0-based
  int64_t epochs = 0;
  int64_t step = 0;   // steps done, 1-based
  int64_t total = 0;
  double lr = 0;      // the step's learning rate
  // The GPU's fp16 loss scaling: scaling adds train/loss_scale to the scalars; without a GPU
  // the scale is 1 and no step is skipped.
  bool scaling = false;
  double loss_scale = 1;
  int64_t skipped_steps = 0;
};

// The steps since the last train line, summed (this rank's numbers; samples/s counts all ranks).
struct LogWindow {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double loss = 0;  // sum over samples of the loss
  int64_t samples = 0, hits = 0, steps = 0, positions = 0;
  double step_s = 0, comm_s = 0, exposed_s = 0, data_s = 0;  // per-step times summed over the window
  double grad_norm = 0;      // summed over the steps that measured it
  int64_t norm_steps = 0;    // how many did
  void add(const StepTally& s);
};

class Telemetry {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // tb_dir: rank 0's TensorBoard directory ("" = none); world: the number of ranks;
  // run_start: when the run began (metrics.jsonl's "time"). Throws UserError for a bad
  // profile.trace_steps.
  Telemetry(const Config& cfg, int rank, int world, const std::string& tb_dir, TimePoint run_start);

  // One step (1-based `step`, the number the progress line shows): its phases in order.
  void begin_step(int64_t step);
  void phase(const char* name, TimePoint begin, TimePoint end);  // "data", "forward", "backward", "optimizer"
  void comm(const ReducerStepTimes& times);                       // the step's bucket all-reduces
  void end_step();

  // After each step (every rank): adds it to the log window and updates the console progress;
  // every train.log_every steps and at the last one, the train line (log, scalars and rank 0's
  // metrics.jsonl line in `run`), and a new window begins.
  void step_done(const StepTally& tally, const StepPosition& at, RunDir& run);
  // Starts an empty log window now (the first one begins when training does, after set-up).
  void restart_window() { log_window_ = LogWindow{}; }
  // Samples are token windows of `per_sample` positions: the progress and train lines add
  // tokens/s (metrics.jsonl tokens_per_s) and call the accuracy a token accuracy.
  void count_tokens(int64_t per_sample) { tokens_per_sample_ = per_sample; }
  // Every train line also gathers the straggler report (collectives/straggler.h: a collective
  // over `comm`, so every rank calls this, or none): rank 0 adds it to its metrics.jsonl train
  // line (bucket_skew_ms, last_rank, last_host, last_count, last_of, lateness_ms, straggler) and,
  // when it names a rank later than threshold_ms, to the log and the progress line.
  void watch_stragglers(Communicator& comm, double threshold_ms);

  // Rank 0: scalars into the event file at `step`.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // Rank 0: the console progress line (a no-op on other ranks and below log level info).
  void progress(const metrics::ProgressState& state, bool force);
  // Ends a terminal progress line before other console output.
  void end_progress_line();

  // The per-layer profile's spans (profile.layers) of the steps inside profile.trace_steps, as
  // the trace's "device" lane (nothing when the windows do not overlap).
  void layer_spans(const metrics::LayerProfile& p);

  // End of the run (every rank, collectively): gathers the trace fragments to rank 0, which
  // writes <run>/trace.json; returns the overlap summary line ("" with one rank).
  std::string finish(Bootstrap& boot, const RunDir& run);

  const metrics::OverlapSummary& overlap() const { return overlap_; }

 private:
  double trace_us(TimePoint t) const;
  void show_progress(const StepPosition& at);
  void write_train_line(const StepPosition& at, RunDir& run);
  void report_stragglers(nlohmann::json& line);
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
  // The train lines.
  int world_;
  int64_t log_every_;
  int64_t tokens_per_sample_ = 0;  // count_tokens; 0: samples are not token windows
  TimePoint run_start_;
  LogWindow log_window_;
  // The straggler report (watch_stragglers): its watch, every rank's host, the progress note.
  std::unique_ptr<StragglerWatch> stragglers_;
  std::vector<std::string> hosts_;
  std::string straggler_note_;
  double straggler_ms_ = 0;
};

}  // namespace dp::launch
