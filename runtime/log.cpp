#include "runtime/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/error.h"

namespace dp::log {
namespace {
struct State {
  std::mutex mu;
  std::vector<spdlog::sink_ptr> sinks;
  spdlog::level::level_enum level = spdlog::level::info;
  std::unordered_map<std::string, std::shared_ptr<spdlog::logger>> loggers;
  bool configured = false;
};
State& state() {
  static State s;
  return s;
}

std::string pattern() {
  const auto& id = process_identity();
  return fmt::format("[%H:%M:%S.%e] [rank {}/{} {}] [%n] %^%l%$: %v", id.rank, id.world_size, id.host);
}

void default_sinks(State& s) {
  if (s.configured) return;
  s.sinks = {std::make_shared<spdlog::sinks::stderr_color_sink_mt>()};
  s.configured = true;
}
}  // namespace

std::shared_ptr<spdlog::logger> get(const std::string& subsystem) {
  auto& s = state();
  std::lock_guard lock(s.mu);
  default_sinks(s);
  auto it = s.loggers.find(subsystem);
  if (it != s.loggers.end()) return it->second;
  auto lg = std::make_shared<spdlog::logger>(subsystem, s.sinks.begin(), s.sinks.end());
  lg->set_pattern(pattern());
  lg->set_level(s.level);
  s.loggers.emplace(subsystem, lg);
  return lg;
}

void configure(const std::string& level, const std::string& file_path, bool console_all) {
  auto& s = state();
  std::lock_guard lock(s.mu);
  auto lv = spdlog::level::from_str(level);
  if (lv == spdlog::level::off && level != "off")
    DP_THROW_USER("unknown log level '{}': use one of trace, debug, info, warn, error, off", level);
  s.level = lv;
  s.sinks.clear();
  if (console_all || process_identity().rank == 0)
    s.sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!file_path.empty())
    s.sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file_path, /*truncate=*/false));
  s.configured = true;
  for (auto& [name, lg] : s.loggers) {
    lg->sinks() = s.sinks;
    lg->set_pattern(pattern());
    lg->set_level(s.level);
  }
}

void refresh_prefix() {
  auto& s = state();
  std::lock_guard lock(s.mu);
  for (auto& [name, lg] : s.loggers) lg->set_pattern(pattern());
}

}  // namespace dp::log
