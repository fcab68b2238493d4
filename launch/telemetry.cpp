#include "launch/telemetry.h"

#include <cstdio>
#include <string_view>

#include "base/error.h"
#include "runtime/log.h"

namespace dp::launch {

Telemetry::Telemetry(const Config& cfg, int rank, const std::string& tb_dir)
    : rank_(rank),
      console_(rank == 0 && log::parse_level(cfg.run.log_level) <= spdlog::level::info),
      window_(metrics::parse_step_range(cfg.profile.trace_steps, "profile.trace_steps")),
      trace_(rank),
      anchor_steady_(std::chrono::steady_clock::now()),
      anchor_us_(metrics::TraceRecorder::now_us()) {
  trace_.set_enabled(false);
  if (rank == 0 && cfg.run.tensorboard && !tb_dir.empty()) tb_ = std::make_unique<metrics::TbWriter>(tb_dir);
  const bool terminal = metrics::stdout_is_terminal();
  // Off a terminal, progress_every_s = 0 leaves the console to the log lines every log_every steps.
  if (console_ && (terminal || cfg.run.progress_every_s > 0))
    printer_ = std::make_unique<metrics::ProgressPrinter>(terminal, static_cast<double>(cfg.run.progress_every_s));
}

double Telemetry::trace_us(TimePoint t) const {
  return anchor_us_ + std::chrono::duration<double, std::micro>(t - anchor_steady_).count();
}

void Telemetry::begin_step(int64_t step) {
  step_ = step;
  trace_.set_enabled(window_.contains(step));
  current_ = metrics::StepTimeline{};
}

void Telemetry::phase(const char* name, TimePoint begin, TimePoint end) {
  const double b = trace_us(begin), e = trace_us(end);
  const bool data = std::string_view(name) == "data";
  if (!data) current_.compute.push_back({b, e});
  if (trace_.enabled())  // outside the window: no event strings built on the hot path
    trace_.complete(name, data ? "data" : "step", data ? metrics::kLaneData : metrics::kLaneCompute, b, e - b);
}

void Telemetry::comm(const ReducerStepTimes& times) {
  for (const auto& s : times.buckets) {
    const double b = trace_us(s.begin), e = trace_us(s.end);
    current_.comm.push_back({b, e});
    if (trace_.enabled())
      trace_.complete(fmt::format("allreduce bucket {}", s.bucket), "comm", metrics::kLaneComm, b, e - b);
    any_comm_ = true;
  }
}

void Telemetry::end_step() {
  overlap_ += metrics::step_overlap(current_);
  trace_.set_enabled(false);
}

void Telemetry::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  if (tb_) tb_->add_scalars(step, values);
}

void Telemetry::progress(const metrics::ProgressState& state, bool force) {
  if (!printer_) return;
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - anchor_steady_).count();
  const std::string text = printer_->update(state, now, force);
  if (text.empty()) return;
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

void Telemetry::end_progress_line() {
  if (!printer_) return;
  const std::string text = printer_->finish();
  if (text.empty()) return;
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

std::string Telemetry::finish(Bootstrap& boot, const RunDir& run) {
  end_progress_line();
  if (!window_.empty()) {
    // Every rank takes part, whether or not its run reached the window.
    const std::vector<std::string> fragments = boot.allgather(trace_.fragment());
    if (rank_ == 0) {
      run.write_text("trace.json", metrics::merge_trace_fragments(fragments));
      log::get("train")->info("trace of steps {}-{} written to {} (open it in https://ui.perfetto.dev)",
                              window_.first, window_.last, run.file("trace.json"));
    }
  }
  return any_comm_ ? metrics::format_overlap(overlap_) : "";
}

}  // namespace dp::launch
