// Exposed vs hidden communication time, on hand-made intervals with exact answers.
#include <gtest/gtest.h>

#include "launch/telemetry/comm_overlap.h"

namespace dp::metrics {
namespace {

TEST(CommOverlap, BucketsDuringBackwardAreHiddenTheLastIsExposed) {
  // forward [0,100), backward [100,300), optimizer [380,400); buckets [150,230) and [300,380).
  const auto s = step_overlap({.compute = {{0, 100}, {100, 300}, {380, 400}}, .comm = {{150, 230}, {300, 380}}});
  EXPECT_EQ(s.steps, 1);
  EXPECT_EQ(s.compute_us, 320.0);
  EXPECT_EQ(s.comm_us, 160.0);
  EXPECT_EQ(s.hidden_us, 80.0);
  EXPECT_EQ(s.exposed_us, 80.0);
}

TEST(CommOverlap, OverlappingIntervalsCountOnce) {
  // Two buckets in flight together [10,50) and [30,70) = union [10,70); compute [0,40) and [20,60).
  const auto s = step_overlap({.compute = {{20, 60}, {0, 40}}, .comm = {{30, 70}, {10, 50}}});
  EXPECT_EQ(s.compute_us, 60.0);
  EXPECT_EQ(s.comm_us, 60.0);
  EXPECT_EQ(s.hidden_us, 50.0);  // [10,60)
  EXPECT_EQ(s.exposed_us, 10.0);  // [60,70)
}

TEST(CommOverlap, NoOverlapAndEmptyIntervals) {
  auto s = step_overlap({.compute = {{0, 100}}, .comm = {{100, 125}, {5, 5}, {9, 3}}});
  EXPECT_EQ(s.comm_us, 25.0);
  EXPECT_EQ(s.hidden_us, 0.0);
  EXPECT_EQ(s.exposed_us, 25.0);
  s = step_overlap({.compute = {{0, 100}}, .comm = {}});
  EXPECT_EQ(s.comm_us, 0.0);
  EXPECT_EQ(s.exposed_us, 0.0);
}

TEST(CommOverlap, SummedOverStepsAndFormatted) {
  const auto total = summarise_overlap({
      {.compute = {{0, 100}, {100, 300}, {380, 400}}, .comm = {{150, 230}, {300, 380}}},  // 160 comm, 80 hidden
      {.compute = {{0, 400}}, .comm = {{50, 90}}},                                        // 40 comm, all hidden
  });
  EXPECT_EQ(total.steps, 2);
  EXPECT_EQ(total.compute_us, 720.0);
  EXPECT_EQ(total.comm_us, 200.0);
  EXPECT_EQ(total.hidden_us, 120.0);
  EXPECT_EQ(total.exposed_us, 80.0);
  EXPECT_EQ(format_overlap(total),
            "communication over 2 steps: 0.100 ms/step, 0.060 hidden behind compute (60.0%), 0.040 exposed; "
            "compute 0.360 ms/step");
  EXPECT_EQ(format_overlap(summarise_overlap({{.compute = {{0, 1}}, .comm = {}}})),
            "communication over 1 step: none");
}

}  // namespace
}  // namespace dp::metrics
