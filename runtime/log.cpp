#include "runtime/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "runtime/suggest.h"

namespace dp::log {
namespace {
struct State {
  std::mutex mu;
  std::vector<spdlog::sink_ptr> sinks;
  spdlog::level::level_enum level = spdlog::level::info;
  std::unordered_map<std::string, spdlog::level::level_enum> sub_levels;  // run.log_levels
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

spdlog::level::level_enum level_for(const State& s, const std::string& subsystem) {
  auto it = s.sub_levels.find(subsystem);
  return it == s.sub_levels.end() ? s.level : it->second;
}

std::string trim(const std::string& t) {
  const auto b = t.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return t.substr(b, t.find_last_not_of(" \t") - b + 1);
}

// Our own word list (kLogLevelNames), not spdlog::level::from_str, which maps every unknown
// word to "off".
bool level_from_word(const std::string& w, spdlog::level::level_enum& out) {
  const auto lv = enum_from_name<LogLevel>(w);
  if (lv) out = spdlog_level(*lv);
  return lv.has_value();
}

std::string level_words() { return join(enum_name_list<LogLevel>()); }

LogLevel level_of_word(const std::string& level) {
  const auto lv = enum_from_name<LogLevel>(level);
  if (!lv) DP_THROW_USER("unknown log level '{}': use one of {}", level, level_words());
  return *lv;
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
  lg->set_level(level_for(s, subsystem));
  s.loggers.emplace(subsystem, lg);
  return lg;
}

spdlog::level::level_enum spdlog_level(LogLevel level) {
  switch (level) {
    case LogLevel::Trace: return spdlog::level::trace;
    case LogLevel::Debug: return spdlog::level::debug;
    case LogLevel::Info: return spdlog::level::info;
    case LogLevel::Warn: return spdlog::level::warn;
    case LogLevel::Error: return spdlog::level::err;
    case LogLevel::Off: return spdlog::level::off;
  }
  return spdlog::level::info;  // not reached: every enumerator is handled above
}

spdlog::level::level_enum parse_level(const std::string& level) { return spdlog_level(level_of_word(level)); }

std::vector<std::pair<std::string, spdlog::level::level_enum>> parse_levels(const std::string& spec) {
  std::vector<std::pair<std::string, spdlog::level::level_enum>> out;
  if (trim(spec).empty()) return out;
  std::stringstream in(spec);
  std::string entry;
  while (std::getline(in, entry, ',')) {
    const auto eq = entry.find('=');
    const std::string sub = trim(entry.substr(0, eq));
    const std::string word = eq == std::string::npos ? "" : trim(entry.substr(eq + 1));
    if (eq == std::string::npos || sub.empty() || word.empty() || word.find('=') != std::string::npos)
      DP_THROW_USER("run.log_levels: malformed entry '{}' in '{}' (use subsystem=level, comma-separated, e.g. "
                    "ring=debug,ckpt=warn)",
                    trim(entry), spec);
    spdlog::level::level_enum lv;
    if (!level_from_word(word, lv))
      DP_THROW_USER("run.log_levels: unknown level '{}' for subsystem '{}' (use one of {})", word, sub, level_words());
    out.emplace_back(sub, lv);
  }
  // getline drops a trailing empty field: "ring=debug," is malformed too.
  if (spec.back() == ',')
    DP_THROW_USER("run.log_levels: malformed entry '' in '{}' (use subsystem=level, comma-separated, e.g. "
                  "ring=debug,ckpt=warn)",
                  spec);
  return out;
}

void configure(const std::string& level, const std::string& file_path, bool console_all,
               const std::string& subsystem_levels) {
  configure(level_of_word(level), file_path, console_all, subsystem_levels);
}

void configure(LogLevel level, const std::string& file_path, bool console_all, const std::string& subsystem_levels) {
  // Parse everything before changing anything: a bad value leaves the logging as it was.
  const auto lv = spdlog_level(level);
  const auto subs = parse_levels(subsystem_levels);
  auto& s = state();
  std::lock_guard lock(s.mu);
  s.level = lv;
  s.sub_levels.clear();
  for (const auto& [sub, sub_lv] : subs) s.sub_levels[sub] = sub_lv;
  s.sinks.clear();
  if (console_all || process_identity().rank == 0)
    s.sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!file_path.empty())
    s.sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file_path, /*truncate=*/false));
  s.configured = true;
  for (auto& [name, lg] : s.loggers) {
    lg->sinks() = s.sinks;
    lg->set_pattern(pattern());
    lg->set_level(level_for(s, name));
  }
}

void refresh_prefix() {
  auto& s = state();
  std::lock_guard lock(s.mu);
  for (auto& [name, lg] : s.loggers) lg->set_pattern(pattern());
}

}  // namespace dp::log
