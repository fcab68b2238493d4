#include "launch/restart_record.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include "launch/run_dir.h"
#include "runtime/checkpoint/checkpoint_dir.h"

namespace dp::launch {

namespace fs = std::filesystem;

int64_t last_step_done(const std::vector<RankFlight>& records) {
  int64_t best = -1;
  for (const RankFlight& f : records) {
    std::set<int64_t> reduced, spoiled;  // steps with a gradient all-reduce done; with one not done
    for (const auto& [seq, c] : f.collectives) {
      if (c.step < 0 || c.bucket < 0) continue;  // the stop agreement after a step is no part of it
      (c.state == "done" ? reduced : spoiled).insert(c.step);
    }
    for (int64_t step : reduced)
      if (!spoiled.count(step)) best = std::max(best, step);
  }
  return best;
}

nlohmann::json restart_metrics_line(const RestartEvent& e, const RestartFacts& f, double unix_time) {
  nlohmann::json j = {{"split", "restart"},           {"restart", e.restart},
                      {"max_restarts", e.max_restarts}, {"rank", e.failure.rank},
                      {"host", e.host},                 {"exit_status", e.failure.status},
                      {"signal", e.failure.signal}};
  if (e.failure.signal != 0) j["signal_name"] = signal_name(e.failure.signal);
  else j["exit_code"] = e.failure.status;
  j["cause"] = describe_exit(e.failure);
  j["watchdog"] = f.verdict.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.verdict);
  j["resume_step"] = f.resume_step;
  j["last_step"] = f.last_step >= 0 ? nlohmann::json(f.last_step) : nlohmann::json(nullptr);
  j["steps_lost"] =
      f.last_step >= 0 ? nlohmann::json(std::max<int64_t>(0, f.last_step - f.resume_step)) : nlohmann::json(nullptr);
  j["unix_time"] = unix_time;
  return j;
}

std::string restart_details(const RestartFacts& f) {
  std::string s = f.verdict.empty() ? std::string() : "the watchdog: " + f.verdict + "; ";
  s += f.resume_step > 0 ? fmt::format("resuming from step {}", f.resume_step)
                         : std::string("no checkpoint yet: starting over from step 0");
  if (f.last_step >= 0) {
    const int64_t lost = std::max<int64_t>(0, f.last_step - f.resume_step);
    s += fmt::format(" ({} step{} lost)", lost, lost == 1 ? "" : "s");
  }
  return s;
}

std::vector<std::string> restart_events(const std::string& metrics_text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < metrics_text.size()) {
    size_t end = metrics_text.find('\n', start);
    if (end == std::string::npos) end = metrics_text.size();
    const auto j = nlohmann::json::parse(metrics_text.substr(start, end - start), nullptr, false);
    start = end + 1;
    if (!j.is_object() || j.value("split", "") != "restart") continue;
    std::string e = fmt::format("restart {} of {}: rank {} on {} {}; resumed from step {}", j.value("restart", 0),
                                j.value("max_restarts", 0), j.value("rank", -1), j.value("host", "?"),
                                j.value("cause", "?"), j.value("resume_step", int64_t{0}));
    if (j.contains("steps_lost") && j["steps_lost"].is_number()) e += fmt::format(" ({} steps lost)", j["steps_lost"].get<int64_t>());
    if (j.contains("watchdog") && j["watchdog"].is_string()) e += "; the watchdog: " + j["watchdog"].get<std::string>();
    out.push_back(e);
  }
  return out;
}

namespace {

std::vector<fs::path> flight_files(const std::string& run_path) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_path + "/flight", ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && n.rfind("rank-", 0) == 0 && e.path().extension() == ".json") out.push_back(e.path());
  }
  return out;
}

}  // namespace

void set_flight_records_aside(const std::string& run_path, int restart) {
  const std::vector<fs::path> files = flight_files(run_path);
  if (files.empty()) return;
  const fs::path sub = fs::path(run_path) / "flight" / fmt::format("before-restart-{}", restart);
  std::error_code ec;
  fs::create_directories(sub, ec);
  for (const auto& f : files) fs::rename(f, sub / f.filename(), ec);
}

RestartFacts read_restart_facts(const std::string& run_path) {
  RestartFacts f;
  const auto ckpts = CheckpointDir(run_path + "/checkpoints").list();
  if (!ckpts.empty()) f.resume_step = ckpts.front().step;
  if (flight_files(run_path).empty()) return f;
  try {
    const std::vector<RankFlight> records = read_flight_dir(run_path);
    f.verdict = diagnose_flight(records);
    f.last_step = last_step_done(records);
  } catch (const std::exception& e) {  // an unreadable record: the restart goes on without it
    f.verdict = fmt::format("(flight records unreadable: {})", e.what());
  }
  return f;
}

std::string record_restart(const std::string& run_dir, const std::string& run_name, const RestartEvent& e) {
  RunDir run(run_dir, run_name);
  const RestartFacts f = read_restart_facts(run.path());
  set_flight_records_aside(run.path(), e.restart);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  run.append_metrics(restart_metrics_line(e, f, now));
  return restart_details(f);
}

}  // namespace dp::launch
