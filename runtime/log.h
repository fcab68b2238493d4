// defines: per-subsystem loggers with the "[rank r/N host] [subsystem]" prefix.
// Rank 0 talks on the console; every rank can also write its own file (runtime/log.cpp).
#pragma once
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace dp::log {

// The logger of one subsystem ("train", "data", "config", "coll", ...), created on first use.
// Level checks happen inside spdlog before formatting.
std::shared_ptr<spdlog::logger> get(const std::string& subsystem);

// Set up sinks: console on rank 0 (or all ranks if console_all), plus an optional file.
// level: trace|debug|info|warn|error|off.  Safe to call again (reconfigures every logger).
void configure(const std::string& level, const std::string& file_path = "", bool console_all = false);

// Re-applies the "[rank r/N host]" prefix to every logger after the process identity changed
// (the bootstrap learns the rank after the first loggers exist).
void refresh_prefix();

}  // namespace dp::log
