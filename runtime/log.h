// defines: per-subsystem loggers with the "[rank r/N host] [subsystem]" prefix, the global
// level and per-subsystem levels (run.log_levels = "ring=debug,ckpt=warn", NCCL_DEBUG_SUBSYS's idea).
// Rank 0 talks on the console; every rank can also write its own file (runtime/log.cpp).
#pragma once
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/log_level.h"

namespace dp::log {

// The logger of one subsystem ("train", "data", "config", "coll", ...), created on first use.
// Level checks happen inside spdlog before formatting.
std::shared_ptr<spdlog::logger> get(const std::string& subsystem);

// Set up sinks: console on rank 0 (or all ranks if console_all), plus an optional file.
// level: trace|debug|info|warn|error|off, for every subsystem not named in subsystem_levels.
// subsystem_levels: run.log_levels, "sub=level,sub=level" (see parse_levels); also applies to
// loggers created later. Safe to call again (reconfigures every logger).
// Throws UserError (nothing changed) for an unknown level or a malformed entry.
void configure(LogLevel level, const std::string& file_path = "", bool console_all = false,
               const std::string& subsystem_levels = "");
// The same with the level as a word (tests, $DPTRAIN_TEST_LOG): UserError for an unknown word.
void configure(const std::string& level, const std::string& file_path = "", bool console_all = false,
               const std::string& subsystem_levels = "");

// "trace|debug|info|warn|error|off" -> the level; UserError naming the allowed words otherwise.
spdlog::level::level_enum parse_level(const std::string& level);
// run.log_level -> spdlog's level.
spdlog::level::level_enum spdlog_level(LogLevel level);

// Parses run.log_levels: comma-separated "subsystem=level" entries, spaces around names allowed,
// "" = none. The subsystem is any logger name (loggers are created on first use, so names are
// not checked); a later entry for the same subsystem wins. Throws UserError:
//   run.log_levels: malformed entry 'ring' in 'ring,ckpt=warn' (use subsystem=level, comma-separated, e.g. ring=debug,ckpt=warn)
//   run.log_levels: unknown level 'loud' for subsystem 'ring' (use one of trace, debug, info, warn, error, off)
std::vector<std::pair<std::string, spdlog::level::level_enum>> parse_levels(const std::string& spec);

// Re-applies the "[rank r/N host]" prefix to every logger after the process identity changed
// (the bootstrap learns the rank after the first loggers exist).
void refresh_prefix();

}  // namespace dp::log
