// analyse_arrivals (collectives/straggler.h): who arrived last, how late, the per-bucket skew.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "collectives/straggler.h"

namespace dp {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(Stragglers, TheRankWithTheShortestWaitArrivedLast) {
  // 4 ranks, 4 all-reduces over buckets 0, 1, 0, 1. Rank 2 comes 30 ms after the others three
  // times (its time in the all-reduce is 30 ms shorter), rank 0 once by 5 ms.
  const std::vector<std::vector<double>> s = {{0.040, 0.041, 0.035, 0.040},
                                              {0.041, 0.040, 0.041, 0.041},
                                              {0.010, 0.011, 0.041, 0.010},
                                              {0.040, 0.042, 0.040, 0.040}};
  const StragglerReport r = analyse_arrivals(s, {0, 1, 0, 1}, 20);
  EXPECT_EQ(r.collectives, 4);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.last_count, 3);
  // lateness: the median minus its time: 30 ms, 29.5 ms, 30 ms
  EXPECT_NEAR(r.lateness_ms, (30 + 29.5 + 30) / 3.0, 1e-9);
  EXPECT_TRUE(r.flagged);
  ASSERT_EQ(r.bucket_skew_ms.size(), 2u);
  EXPECT_NEAR(r.bucket_skew_ms[0], (31 + 6) / 2.0, 1e-9);   // (41-10), (41-35)
  EXPECT_NEAR(r.bucket_skew_ms[1], (31 + 31) / 2.0, 1e-9);  // (42-11), (41-10)
  EXPECT_FALSE(analyse_arrivals(s, {0, 1, 0, 1}, 40).flagged);  // below the threshold: measured, not named
}

TEST(Stragglers, MissingMeasurementsAndTiesAndTooFewRanks) {
  // The second all-reduce is unknown on rank 1 (NaN): left out. Ranks 0 and 1 each last once:
  // the larger lateness wins.
  const std::vector<std::vector<double>> s = {{0.010, 0.5, 0.030}, {0.030, kNaN, 0.028}, {0.030, 0.5, 0.030}};
  const StragglerReport r = analyse_arrivals(s, {0, 0, 0}, 1);
  EXPECT_EQ(r.collectives, 2);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.last_count, 1);
  EXPECT_NEAR(r.lateness_ms, 20, 1e-9);
  EXPECT_EQ(analyse_arrivals({{0.1}}, {0}, 1).collectives, 0);  // one rank: nothing to compare
  EXPECT_EQ(analyse_arrivals({{}, {}}, {}, 1).rank, -1);
}

}  // namespace
}  // namespace dp
