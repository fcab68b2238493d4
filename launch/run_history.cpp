#include "launch/run_history.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace dp::launch {

namespace fs = std::filesystem;

MetricsTrim trim_metrics(const std::string& text, int64_t step) {
  MetricsTrim t;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool has_step = j.is_object() && j.contains("step") && j["step"].is_number_integer();
    if (has_step && j["step"].get<int64_t>() > step) {
      ++t.dropped;
      continue;
    }
    if (has_step && j["step"].get<int64_t>() == step && j.value("split", "") == "eval") t.eval_at_step = true;
    t.kept += line + "\n";
  }
  return t;
}

MetricsTrim trim_metrics_file(const RunDir& run, int64_t step) {
  const std::string path = run.file("metrics.jsonl");
  if (!fs::exists(path)) return {};
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) DP_THROW_USER("cannot read '{}'", path);
  MetricsTrim t = trim_metrics(ss.str(), step);
  if (t.dropped > 0) run.write_text("metrics.jsonl", t.kept);
  return t;
}

std::string set_aside_folder_name(std::time_t t) {
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return std::string("before-reset-") + stamp;
}

namespace {

// The earlier run's files in `dir` that a new run would append to or leave misleading.
std::vector<std::string> earlier_run_files(const std::string& dir) {
  std::vector<std::string> names;
  for (const char* n : {"metrics.jsonl", "trace.json", "final.safetensors", "replicas"})
    if (fs::exists(dir + "/" + n)) names.emplace_back(n);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("events.out.tfevents.", 0) == 0) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

SetAside set_aside_earlier_run(const RunDir& run, std::time_t now) {
  SetAside s;
  s.moved = earlier_run_files(run.path());
  if (s.moved.empty()) return s;
  std::string folder = run.file(set_aside_folder_name(now));
  for (int k = 2; fs::exists(folder); ++k) folder = run.file(set_aside_folder_name(now)) + "." + std::to_string(k);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) DP_THROW_USER("cannot create '{}' for the earlier run's files: {}", folder, ec.message());
  for (const auto& n : s.moved) {
    fs::rename(run.file(n), folder + "/" + n, ec);
    if (ec) DP_THROW_USER("cannot move '{}' to '{}': {}", run.file(n), folder, ec.message());
  }
  s.folder = folder;
  return s;
}

}  // namespace dp::launch
