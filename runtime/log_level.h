// defines: LogLevel (run.log_level) and its name table, the words log::configure and the config
// schema accept.
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp {

// In increasing severity, so `level <= LogLevel::Info` means "info lines are shown".
enum class LogLevel { Trace, Debug, Info, Warn, Error, Off };

inline constexpr EnumName<LogLevel> kLogLevelNames[] = {
    {LogLevel::Trace, "trace"}, {LogLevel::Debug, "debug"}, {LogLevel::Info, "info"},
    {LogLevel::Warn, "warn"},   {LogLevel::Error, "error"}, {LogLevel::Off, "off"}};
constexpr std::span<const EnumName<LogLevel>> enum_names(LogLevel) { return kLogLevelNames; }

}  // namespace dp
