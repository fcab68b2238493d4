// The table of DPTRAIN_* tunables (runtime/tunables.h): defaults when unset, values parsed by
// their type, a bad value refused with one exact message naming the variable, its value and what
// is allowed, and a variable set in the environment logged once per process.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "base/error.h"
#include "runtime/log.h"
#include "runtime/tunables.h"

namespace dp {
namespace {

std::function<const char*(const char*)> map_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::string& name, const std::string& value) {
  try {
    read_tunables(map_env({{name, value}}));
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Tunables, TheTableIsInEnumOrderAndEveryDefaultIsValid) {
  ASSERT_EQ(tunable_specs().size(), kTunableCount);
  for (size_t i = 0; i < kTunableCount; ++i) {
    const TunableSpec& s = tunable_spec(static_cast<Tunable>(i));
    EXPECT_EQ(static_cast<size_t>(s.id), i);
    EXPECT_EQ(s.name.rfind("DPTRAIN_", 0), 0u) << s.name;
    EXPECT_FALSE(s.meaning.empty()) << s.name;
  }
  EXPECT_NO_THROW(read_tunables(map_env({})));
}

TEST(Tunables, UnsetOrEmptyMeansTheDefault) {
  const Tunables t = read_tunables(map_env({{"DPTRAIN_RING_SMALL_BYTES", ""}}));
  EXPECT_FALSE(t.is_set(Tunable::RingSmallBytes));
  EXPECT_EQ(t.integer(Tunable::RingSmallBytes), 65536);
  EXPECT_EQ(t.integer(Tunable::RingPieceBytes), 262144);
  EXPECT_EQ(t.integer(Tunable::RingSocketBuffer), 4194304);
  EXPECT_EQ(t.integer(Tunable::RingShmBytes), 1048576);
  EXPECT_DOUBLE_EQ(t.number(Tunable::RingSpinUs), 50.0);
  EXPECT_EQ(t.text(Tunable::RingHost), "");
  EXPECT_FALSE(t.is_set(Tunable::FaultKillAfterStep));
  EXPECT_THROW(t.integer(Tunable::FaultKillAfterStep), DpError);  // no default: ask is_set first
  EXPECT_THROW(t.number(Tunable::RingSmallBytes), DpError);       // an integer tunable
}

TEST(Tunables, SetValuesAreParsedByTheirType) {
  const Tunables t = read_tunables(map_env({{"DPTRAIN_RING_SMALL_BYTES", "0"},
                                            {"DPTRAIN_RING_SPIN_US", "12.5"},
                                            {"DPTRAIN_RING_HOST", "10.0.0.7"},
                                            {"DPTRAIN_FAULT_KILL_AFTER_STEP", "23"},
                                            {"DPTRAIN_FAULT_DEVICE_OOM_AT_STEP", "7"}}));
  EXPECT_TRUE(t.is_set(Tunable::RingSmallBytes));
  EXPECT_EQ(t.integer(Tunable::RingSmallBytes), 0);
  EXPECT_DOUBLE_EQ(t.number(Tunable::RingSpinUs), 12.5);
  EXPECT_EQ(t.text(Tunable::RingHost), "10.0.0.7");
  EXPECT_TRUE(t.is_set(Tunable::FaultKillAfterStep));
  EXPECT_EQ(t.integer(Tunable::FaultKillAfterStep), 23);
  EXPECT_EQ(t.text(Tunable::FaultKillAfterStep), "23");
  EXPECT_EQ(t.integer(Tunable::FaultDeviceOomAtStep), 7);
}

TEST(Tunables, ABadValueIsOneErrorNamingTheVariableItsValueAndTheRange) {
  EXPECT_EQ(error_of("DPTRAIN_RING_SPIN_US", "fast"),
            "environment variable DPTRAIN_RING_SPIN_US = \"fast\" is not allowed: expected a number in [0, 1000000]; "
            "unset it for the default (50)");
  EXPECT_EQ(error_of("DPTRAIN_RING_SPIN_US", "-1"),
            "environment variable DPTRAIN_RING_SPIN_US = \"-1\" is not allowed: expected a number in [0, 1000000]; "
            "unset it for the default (50)");
  EXPECT_EQ(error_of("DPTRAIN_RING_SMALL_BYTES", "64k"),
            "environment variable DPTRAIN_RING_SMALL_BYTES = \"64k\" is not allowed: expected an integer in [0, max]; "
            "unset it for the default (65536)");
  EXPECT_EQ(error_of("DPTRAIN_RING_PIECE_BYTES", "4"),
            "environment variable DPTRAIN_RING_PIECE_BYTES = \"4\" is not allowed: expected an integer in [8, max]; "
            "unset it for the default (262144)");
  EXPECT_EQ(error_of("DPTRAIN_RING_SOCKET_BUFFER", "4294967296"),
            "environment variable DPTRAIN_RING_SOCKET_BUFFER = \"4294967296\" is not allowed: expected an integer in "
            "[0, 2147483647]; unset it for the default (4194304)");
  EXPECT_EQ(error_of("DPTRAIN_FAULT_KILL_AFTER_STEP", "0"),
            "environment variable DPTRAIN_FAULT_KILL_AFTER_STEP = \"0\" is not allowed: expected an integer in "
            "[1, max]; or unset it");
  EXPECT_EQ(error_of("DPTRAIN_FAULT_KILL_AFTER_STEP", " 5"),
            "environment variable DPTRAIN_FAULT_KILL_AFTER_STEP = \" 5\" is not allowed: expected an integer in "
            "[1, max]; or unset it");
  EXPECT_EQ(error_of("DPTRAIN_FAULT_DEVICE_OOM_AT_STEP", "0"),
            "environment variable DPTRAIN_FAULT_DEVICE_OOM_AT_STEP = \"0\" is not allowed: expected an integer in "
            "[1, max]; or unset it");
}

// The process's tunables: one log line per variable set, however often log_tunables is called;
// reading them again with the same values logs nothing more.
TEST(Tunables, ASetTunableIsLoggedOnce) {
  ::setenv("DPTRAIN_RING_SPIN_US", "20", 1);
  log::configure("info");
  testing::internal::CaptureStderr();
  reload_tunables();
  EXPECT_DOUBLE_EQ(tunables().number(Tunable::RingSpinUs), 20.0);
  log_tunables();
  log_tunables();
  reload_tunables();
  log_tunables();
  log::get("env")->flush();
  const std::string out = testing::internal::GetCapturedStderr();
  ::unsetenv("DPTRAIN_RING_SPIN_US");
  reload_tunables();
  log::configure("warn");
  const std::string line = "[env] info: DPTRAIN_RING_SPIN_US set by the environment to 20 (default 50)\n";
  ASSERT_NE(out.find(line), std::string::npos) << out;
  EXPECT_EQ(out.find(line), out.rfind(line)) << "logged more than once:\n" << out;
  EXPECT_DOUBLE_EQ(tunables().number(Tunable::RingSpinUs), 50.0);
}

TEST(Tunables, TheReferenceAndTheHelpListEveryVariable) {
  const std::string ref = tunables_reference(), help = tunables_help();
  for (const auto& s : tunable_specs()) {
    EXPECT_NE(ref.find("| `" + std::string(s.name) + "` |"), std::string::npos) << s.name;
    EXPECT_NE(help.find("  " + std::string(s.name) + " "), std::string::npos) << s.name;
  }
  EXPECT_NE(help.find("DPTRAIN_RING_SPIN_US             a number in [0, 1000000], default 50\n"), std::string::npos)
      << help;
}

}  // namespace
}  // namespace dp
