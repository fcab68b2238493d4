// Per-subsystem log levels (run.log_levels): parsing, exact errors, and that configure applies
// them to existing loggers and to loggers created later.
#include <gtest/gtest.h>

#include "base/error.h"
#include "runtime/log.h"

namespace dp {
namespace {

std::string user_error(const std::string& spec) {
  try {
    log::parse_levels(spec);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LogLevels, ParsesEntriesInOrder) {
  const auto v = log::parse_levels(" ring = debug,ckpt=warn ,data=off,ring=trace");
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].first, "ring");
  EXPECT_EQ(v[0].second, spdlog::level::debug);
  EXPECT_EQ(v[1].first, "ckpt");
  EXPECT_EQ(v[1].second, spdlog::level::warn);
  EXPECT_EQ(v[2].first, "data");
  EXPECT_EQ(v[2].second, spdlog::level::off);
  EXPECT_EQ(v[3].second, spdlog::level::trace);
  EXPECT_TRUE(log::parse_levels("").empty());
  EXPECT_TRUE(log::parse_levels("  ").empty());
}

TEST(LogLevels, UnknownLevelIsAnExactUserError) {
  EXPECT_EQ(user_error("ring=loud"),
            "run.log_levels: unknown level 'loud' for subsystem 'ring' (use one of trace, debug, info, warn, error, off)");
  EXPECT_EQ(user_error("ring=debug,ckpt=warning"),
            "run.log_levels: unknown level 'warning' for subsystem 'ckpt' (use one of trace, debug, info, warn, error, "
            "off)");
}

TEST(LogLevels, MalformedEntryIsAnExactUserError) {
  const std::string hint = " (use subsystem=level, comma-separated, e.g. ring=debug,ckpt=warn)";
  EXPECT_EQ(user_error("ring,ckpt=warn"), "run.log_levels: malformed entry 'ring' in 'ring,ckpt=warn'" + hint);
  EXPECT_EQ(user_error("=debug"), "run.log_levels: malformed entry '=debug' in '=debug'" + hint);
  EXPECT_EQ(user_error("ring="), "run.log_levels: malformed entry 'ring=' in 'ring='" + hint);
  EXPECT_EQ(user_error("ring=debug=x"), "run.log_levels: malformed entry 'ring=debug=x' in 'ring=debug=x'" + hint);
  EXPECT_EQ(user_error("ring=debug,,ckpt=warn"),
            "run.log_levels: malformed entry '' in 'ring=debug,,ckpt=warn'" + hint);
  EXPECT_EQ(user_error("ring=debug,"), "run.log_levels: malformed entry '' in 'ring=debug,'" + hint);
}

TEST(LogLevels, ConfigureAppliesToExistingAndLaterLoggers) {
  auto early = log::get("lvl_early");
  log::configure("warn", "", false, "lvl_early=debug,lvl_late=error");
  EXPECT_EQ(early->level(), spdlog::level::debug);
  EXPECT_EQ(log::get("lvl_late")->level(), spdlog::level::err);
  EXPECT_EQ(log::get("lvl_other")->level(), spdlog::level::warn);

  // A bad spec changes nothing.
  EXPECT_THROW(log::configure("info", "", false, "lvl_early=nope"), UserError);
  EXPECT_EQ(early->level(), spdlog::level::debug);
  EXPECT_EQ(log::get("lvl_other")->level(), spdlog::level::warn);

  // Reconfiguring without per-subsystem levels returns every logger to the global level.
  log::configure("warn");
  EXPECT_EQ(early->level(), spdlog::level::warn);
  EXPECT_EQ(log::get("lvl_late")->level(), spdlog::level::warn);
}

TEST(LogLevels, DebugLinesOfOneSubsystemOnly) {
  testing::internal::CaptureStderr();
  log::configure("info", "", false, "lvl_chatty=debug");
  log::get("lvl_chatty")->debug("shown");
  log::get("lvl_quiet")->debug("hidden");
  log::get("lvl_chatty")->flush();
  log::configure("warn");
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("[lvl_chatty] debug: shown"), std::string::npos) << out;
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
}

}  // namespace
}  // namespace dp
