// defines: the live progress line (format_progress) and ProgressPrinter, which decides how it is
// shown: on a terminal one line rewritten in place ('\r'); otherwise (Slurm output files, pipes)
// a plain line every run.progress_every_s seconds.
//
// Rank 0's training loop, after every step:
//
//   metrics::ProgressPrinter progress(metrics::stdout_is_terminal(), cfg.run.progress_every_s);
//   ...
//   metrics::ProgressState st{.epoch = e + 1, .epochs = epochs, .step = step, .total_steps = total,
//                             .loss = win_loss, .accuracy = win_acc, .samples_per_s = sps,
//                             .eta_s = metrics::eta_seconds(step, total, sec_per_step)};
//   std::fputs(progress.update(st, now_s).c_str(), stdout); std::fflush(stdout);
//   ...
//   std::fputs(progress.finish().c_str(), stdout);   // before other output, and at the end
//
// update() and finish() only return text, so the decisions are testable without a terminal.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

namespace dp::metrics {

struct ProgressState {
  int64_t epoch = 1, epochs = 1;  // 1-based; epochs 0 = unknown (not shown as "/N")
  int64_t step = 0;               // optimizer steps done
  int64_t total_steps = 0;        // 0 = unknown (not shown as "/N")
  double loss = std::numeric_limits<double>::quiet_NaN();      // NaN = not shown
  double accuracy = std::numeric_limits<double>::quiet_NaN();  // fraction in [0, 1]; NaN = not shown
  double samples_per_s = -1;                                   // < 0 = not shown
  double tokens_per_s = -1;  // language models: shown instead of samples/s when >= 0
  double eta_s = -1;                                           // < 0 = not shown
  double data_share = -1;  // share of the step time spent waiting for data, in [0, 1]; < 0 = not shown
  std::string straggler;   // "rank 5 on h3 +52ms" (collectives/straggler.h); "" = not shown
};

// "epoch 2/10  step 1200/4690  loss 0.4123  acc 85.21%  1234 samples/s  data 3%  ETA 3m12s"
// (a language model: "... token acc 41.20%  52133 tokens/s ..." instead of acc and samples/s)
// (+ "  straggler rank 5 on h3 +52ms" when the last straggler report named one)
// (fields that are unknown are left out; samples/s without decimals from 100 up, else with one).
std::string format_progress(const ProgressState& s);

// "42s", "3m12s", "2h05m" (seconds rounded down; "0s" below one second; "?" when negative or not finite).
std::string format_duration(double seconds);

// Seconds left at seconds_per_step: (total_steps - step) * seconds_per_step; -1 when unknown
// (no total, or a rate not measured yet).
double eta_seconds(int64_t step, int64_t total_steps, double seconds_per_step);

// isatty(stdout), and TERM is not "dumb".
bool stdout_is_terminal();

class ProgressPrinter {
 public:
  // Terminal: redraw at most every kTerminalRefreshS seconds ('\r' + line + "erase to end of
  // line"). Not a terminal: a line every `every_s` seconds (run.progress_every_s; 0 = at every
  // update, so call update() every train.log_every steps then). The first update always prints.
  static constexpr double kTerminalRefreshS = 0.25;
  ProgressPrinter(bool terminal, double every_s) : terminal_(terminal), every_s_(every_s) {}

  // What to write for this update at now_s (seconds on any monotonic clock): "" when it is not
  // time yet. force = true prints regardless of time (end of an epoch).
  std::string update(const ProgressState& s, double now_s, bool force = false);
  // "\n" when a terminal line is showing (so the next output starts on a fresh line), else "".
  std::string finish();

  bool terminal() const { return terminal_; }

 private:
  bool terminal_;
  double every_s_;
  bool printed_ = false;
  bool line_open_ = false;  // a terminal line without its newline yet
  double last_s_ = 0;
};

}  // namespace dp::metrics
