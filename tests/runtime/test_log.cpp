// Logging: the "[rank r/N host] [subsystem]" prefix, and that it follows the process identity
// once the bootstrap knows it.
#include <gtest/gtest.h>

#include "base/error.h"
#include "runtime/log.h"

namespace dp {
namespace {

TEST(Log, PrefixFollowsTheProcessIdentity) {
  testing::internal::CaptureStderr();
  log::configure("info");
  log::get("testsub")->info("before");
  set_process_identity(0, 4);
  log::refresh_prefix();
  log::get("testsub")->info("after");
  log::get("testsub")->flush();
  set_process_identity(0, 1);
  log::refresh_prefix();
  log::configure("warn");
  const std::string out = testing::internal::GetCapturedStderr();
  const std::string host = process_identity().host;
  EXPECT_NE(out.find("[rank 0/1 " + host + "] [testsub] info: before"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 0/4 " + host + "] [testsub] info: after"), std::string::npos) << out;
}

TEST(Log, UnknownLevelIsAUserError) {
  try {
    log::configure("verbose");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "unknown log level 'verbose': use one of trace, debug, info, warn, error, off");
  }
}

}  // namespace
}  // namespace dp
