#include "launch/telemetry/telemetry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "runtime/log.h"

namespace dp::launch {
namespace {

double seconds_since(Telemetry::TimePoint t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

void LogWindow::add(const StepTally& s) {
  loss += s.loss * s.samples, samples += s.samples, hits += s.top1, ++steps;
  positions += s.positions > 0 ? s.positions : s.samples;
  step_s += s.step_s, comm_s += s.comm_s, exposed_s += s.exposed_s, data_s += s.data_s;
  if (!std::isnan(s.grad_norm)) grad_norm += s.grad_norm, ++norm_steps;
}

Telemetry::Telemetry(const Config& cfg, int rank, int world, const std::string& tb_dir, TimePoint run_start)
    : rank_(rank),
      console_(rank == 0 && cfg.run.log_level <= LogLevel::Info),
      window_(metrics::parse_step_range(cfg.profile.trace_steps, "profile.trace_steps")),
      trace_(rank),
      anchor_steady_(std::chrono::steady_clock::now()),
      anchor_us_(metrics::TraceRecorder::now_us()),
      world_(world),
      log_every_(cfg.train.log_every),
      run_start_(run_start) {
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

void Telemetry::step_done(const StepTally& tally, const StepPosition& at, RunDir& run) {
  log_window_.add(tally);
  show_progress(at);
  if (at.step % log_every_ == 0 || at.step == at.total) {
    write_train_line(at, run);
    restart_window();
  }
}

void Telemetry::show_progress(const StepPosition& at) {
  const double dt = seconds_since(log_window_.start);
  const LogWindow& w = log_window_;
  metrics::ProgressState ps;
  ps.epoch = at.epoch + 1, ps.epochs = at.epochs, ps.step = at.step, ps.total_steps = at.total;
  ps.loss = w.loss / w.samples, ps.accuracy = static_cast<double>(w.hits) / w.positions;
  ps.samples_per_s = w.samples * world_ / std::max(dt, 1e-9);
  if (tokens_per_sample_ > 0) ps.tokens_per_s = ps.samples_per_s * static_cast<double>(tokens_per_sample_);
  ps.eta_s = metrics::eta_seconds(at.step, at.total, dt / w.steps);
  ps.data_share = w.data_s / std::max(w.step_s, 1e-9);
  ps.straggler = straggler_note_;
  progress(ps, at.step == at.total);
}

void Telemetry::write_train_line(const StepPosition& at, RunDir& run) {
  const LogWindow& w = log_window_;
  const double dt = seconds_since(w.start);
  const double sps = w.samples * world_ / std::max(dt, 1e-9);  // all ranks
  const double eta = (at.total - at.step) * (dt / w.steps);
  const double loss = w.loss / w.samples, accuracy = static_cast<double>(w.hits) / w.positions;
  end_progress_line();
  scalars(at.step, {{"train/loss", loss},
                    {"train/accuracy", accuracy},
                    {"train/lr", at.lr},
                    {"perf/samples_per_s", sps},
                    {"perf/step_ms", 1e3 * w.step_s / w.steps},
                    {"perf/comm_ms", 1e3 * w.comm_s / w.steps},
                    {"perf/comm_exposed_ms", 1e3 * w.exposed_s / w.steps},
                    {"perf/data_wait_ms", 1e3 * w.data_s / w.steps}});
  if (at.scaling) scalars(at.step, {{"train/loss_scale", at.loss_scale}});
  const double tps = sps * static_cast<double>(tokens_per_sample_);
  const double norm = w.norm_steps > 0 ? w.grad_norm / static_cast<double>(w.norm_steps) : 0;
  if (tokens_per_sample_ > 0) scalars(at.step, {{"perf/tokens_per_s", tps}});
  if (w.norm_steps > 0) scalars(at.step, {{"train/grad_norm", norm}});
  auto lg = log::get("train");
  const double stall = w.data_s / std::max(w.step_s, 1e-9);
  const std::string rate = tokens_per_sample_ > 0 ? fmt::format("{:.0f} tokens/s", tps) : fmt::format("{:.0f} samples/s", sps);
  lg->info("epoch {}/{} step {}/{} loss {:.4f} {} {:.4f} lr {:.3g}{} {} data wait {:.0f}% ETA {}", at.epoch + 1,
           at.epochs, at.step, at.total, loss, tokens_per_sample_ > 0 ? "token acc" : "acc", accuracy, at.lr,
           w.norm_steps > 0 ? fmt::format(" grad norm {:.4g}", norm) : "", rate, 100.0 * stall, hms(eta));
  nlohmann::json line = {{"split", "train"}, {"step", at.step}, {"epoch", at.epoch + 1}, {"loss", loss},
                         {"accuracy", accuracy}, {"lr", at.lr}, {"samples_per_s", sps},
                         {"step_time_s", w.step_s / w.steps}, {"comm_total_s", w.comm_s / w.steps},
                         {"comm_exposed_s", w.exposed_s / w.steps}, {"data_wait_s", w.data_s / w.steps},
                         {"data_stall", stall}, {"loss_scale", at.loss_scale},
                         {"skipped_steps", at.skipped_steps}, {"time", seconds_since(run_start_)}};
  if (tokens_per_sample_ > 0) line.update({{"tokens_per_s", tps}, {"accuracy_over", "tokens"}});
  if (w.norm_steps > 0) line["grad_norm"] = norm;
  report_stragglers(line);  // collective: every rank
  if (rank_ == 0) run.append_metrics(line);
  lg->flush();  // the rank's log file follows the run window by window
}

void Telemetry::watch_stragglers(Communicator& comm, double threshold_ms) {
  if (comm.size() < 2 || comm.flight_recorder() == nullptr) return;
  stragglers_ = std::make_unique<StragglerWatch>(comm, threshold_ms);
  straggler_ms_ = threshold_ms;
  hosts_ = comm.rank_hosts();
}

// The straggler report of the window (collectives/straggler.h) into rank 0's train line, its log
// and its progress line.
void Telemetry::report_stragglers(nlohmann::json& line) {
  if (!stragglers_) return;
  const StragglerReport rep = stragglers_->collect();
  if (rank_ != 0 || rep.collectives == 0) return;
  const std::string host = rep.rank >= 0 && static_cast<size_t>(rep.rank) < hosts_.size() ? hosts_[rep.rank] : "";
  nlohmann::json skew = nlohmann::json::array();
  for (double s : rep.bucket_skew_ms) skew.push_back(std::isfinite(s) ? nlohmann::json(s) : nlohmann::json(nullptr));
  line["bucket_skew_ms"] = skew;
  line["last_rank"] = rep.rank;
  line["last_host"] = host;
  line["last_count"] = rep.last_count;
  line["last_of"] = rep.collectives;
  line["lateness_ms"] = rep.lateness_ms;
  line["straggler"] = rep.flagged ? nlohmann::json(rep.rank) : nlohmann::json(nullptr);
  straggler_note_ = rep.flagged ? fmt::format("rank {} on {} +{:.0f}ms", rep.rank, host, rep.lateness_ms) : "";
  if (rep.flagged)
    log::get("train")->warn("straggler: rank {} on host {} arrived last at {} of {} gradient all-reduces, {:.1f} ms "
                            "after the typical rank (threshold dist.straggler_ms = {:g})",
                            rep.rank, host, rep.last_count, rep.collectives, rep.lateness_ms, straggler_ms_);
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

void Telemetry::layer_spans(const metrics::LayerProfile& p) {
  if (window_.empty()) return;
  std::vector<metrics::TraceEvent> events = metrics::layer_trace_events(p, window_, 0);
  if (events.empty()) return;
  const int lane = trace_.lane("device");  // the lane exists only when it has events
  for (auto& e : events) {
    e.lane = lane;
    trace_.add(std::move(e));
  }
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
