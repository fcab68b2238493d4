#include "launch/telemetry/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace dp::metrics {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto t = static_cast<int64_t>(seconds);
  if (t < 60) return fmt::format("{}s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

double eta_seconds(int64_t step, int64_t total_steps, double seconds_per_step) {
  if (total_steps <= 0 || !(seconds_per_step > 0) || !std::isfinite(seconds_per_step)) return -1;
  return static_cast<double>(std::max<int64_t>(total_steps - step, 0)) * seconds_per_step;
}

std::string format_progress(const ProgressState& s) {
  std::string out = s.epochs > 0 ? fmt::format("epoch {}/{}", s.epoch, s.epochs) : fmt::format("epoch {}", s.epoch);
  out += s.total_steps > 0 ? fmt::format("  step {}/{}", s.step, s.total_steps) : fmt::format("  step {}", s.step);
  if (!std::isnan(s.loss)) out += fmt::format("  loss {:.4f}", s.loss);
  if (!std::isnan(s.accuracy)) out += fmt::format("  {} {:.2f}%", s.tokens_per_s >= 0 ? "token acc" : "acc", 100.0 * s.accuracy);
  if (s.tokens_per_s >= 0)
    out += s.tokens_per_s >= 100 ? fmt::format("  {:.0f} tokens/s", s.tokens_per_s)
                                 : fmt::format("  {:.1f} tokens/s", s.tokens_per_s);
  else if (s.samples_per_s >= 0)
    out += s.samples_per_s >= 100 ? fmt::format("  {:.0f} samples/s", s.samples_per_s)
                                  : fmt::format("  {:.1f} samples/s", s.samples_per_s);
  if (s.data_share >= 0) out += fmt::format("  data {:.0f}%", 100.0 * s.data_share);
  if (s.eta_s >= 0) out += "  ETA " + format_duration(s.eta_s);
  if (!s.straggler.empty()) out += "  straggler " + s.straggler;
  return out;
}

bool stdout_is_terminal() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) == 1 && !(term && std::strcmp(term, "dumb") == 0);
}

std::string ProgressPrinter::update(const ProgressState& s, double now_s, bool force) {
  const double every = terminal_ ? kTerminalRefreshS : every_s_;
  if (printed_ && !force && now_s - last_s_ < every) return "";
  printed_ = true;
  last_s_ = now_s;
  if (!terminal_) return format_progress(s) + "\n";
  line_open_ = true;
  return fmt::format("\r{}\x1b[K", format_progress(s));  // ESC [ K: erase the rest of a longer old line
}

std::string ProgressPrinter::finish() {
  if (!line_open_) return "";
  line_open_ = false;
  return "\n";
}

}  // namespace dp::metrics
