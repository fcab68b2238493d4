// profile.steps: cudaProfilerStart before the window's first step, Stop after its last, once
// each; a resumed run that starts inside the window still captures the rest of it; a run that
// ends inside the window stops the capture on the way out.
#include <gtest/gtest.h>

#include <string>

#include "launch/telemetry/capture_range.h"

namespace dp::metrics {
namespace {

std::string run(StepRange w, int64_t from, int64_t to) {
  std::string calls;
  {
    CaptureRange c(w, [&](bool start) { calls += start ? "S" : "P"; });
    for (int64_t s = from; s <= to; ++s) {
      c.before_step(s);
      calls += std::to_string(s) + (c.capturing() ? "*" : "") + " ";
      c.after_step(s);
    }
  }
  return calls;
}

TEST(CaptureRange, StartsBeforeTheFirstStepAndStopsAfterTheLast) {
  EXPECT_EQ(run(parse_step_range("3-4", "profile.steps"), 1, 6), "1 2 S3* 4* P5 6 ");
  EXPECT_EQ(run(parse_step_range("2", "profile.steps"), 1, 3), "1 S2* P3 ");
}

TEST(CaptureRange, EmptyWindowNeverCalls) { EXPECT_EQ(run(StepRange{}, 1, 3), "1 2 3 "); }

TEST(CaptureRange, ResumedInsideTheWindowCapturesTheRest) {
  EXPECT_EQ(run(parse_step_range("3-6", "profile.steps"), 5, 7), "S5* 6* P7 ");
}

TEST(CaptureRange, RunEndingInsideTheWindowStopsOnTheWayOut) {
  EXPECT_EQ(run(parse_step_range("2-9", "profile.steps"), 1, 3), "1 S2* 3* P");
}

}  // namespace
}  // namespace dp::metrics
