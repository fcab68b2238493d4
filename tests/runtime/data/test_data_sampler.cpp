// Tests for runtime/data/sampler.h: hand-checked DistributedSampler cases, coverage and equal
// lengths over a grid, and the properties of the (seed, epoch) permutation.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "runtime/data/sampler.h"
#include "base/error.h"

using dp::data::sampler_indices;
using dp::data::sampler_indices_from_permutation;
using dp::data::sampler_num_samples;
using dp::data::sampler_permutation;
using V = std::vector<int64_t>;

TEST(DataSampler, TenOverThreePadsFromTheStart) {
  // total = 12: [0..9, 0, 1], rank r takes positions r, r+3, ...
  EXPECT_EQ(sampler_indices(10, 3, 0, false, 0, 0, false), (V{0, 3, 6, 9}));
  EXPECT_EQ(sampler_indices(10, 3, 1, false, 0, 0, false), (V{1, 4, 7, 0}));
  EXPECT_EQ(sampler_indices(10, 3, 2, false, 0, 0, false), (V{2, 5, 8, 1}));
}

TEST(DataSampler, TenOverThreeDropLastTruncates) {
  // total = 9: index 9 is never seen this epoch.
  EXPECT_EQ(sampler_indices(10, 3, 0, false, 0, 0, true), (V{0, 3, 6}));
  EXPECT_EQ(sampler_indices(10, 3, 1, false, 0, 0, true), (V{1, 4, 7}));
  EXPECT_EQ(sampler_indices(10, 3, 2, false, 0, 0, true), (V{2, 5, 8}));
}

TEST(DataSampler, FewerSamplesThanRanks) {
  // n = 2, world = 5: padding 3 > n, so the list repeats cyclically: [0, 1, 0, 1, 0].
  const V want[5] = {{0}, {1}, {0}, {1}, {0}};
  for (int r = 0; r < 5; ++r) EXPECT_EQ(sampler_indices(2, 5, r, false, 0, 0, false), want[r]) << "rank " << r;
  // n = 3, world = 8: [0, 1, 2, 0, 1, 2, 0, 1].
  const V want8[8] = {{0}, {1}, {2}, {0}, {1}, {2}, {0}, {1}};
  for (int r = 0; r < 8; ++r) EXPECT_EQ(sampler_indices(3, 8, r, false, 0, 0, false), want8[r]) << "rank " << r;
  // drop_last: floor(2 / 5) = 0 samples per rank.
  for (int r = 0; r < 5; ++r) EXPECT_TRUE(sampler_indices(2, 5, r, false, 0, 0, true).empty());
  // n = 1 with world 3 and n = 7 with world 3 and padding of a shuffled order.
  EXPECT_EQ(sampler_indices(1, 3, 2, true, 5, 5, false), (V{0}));
  EXPECT_EQ(sampler_indices_from_permutation({4, 2, 0, 3, 1}, 2, 0, false), (V{4, 0, 1}));
  EXPECT_EQ(sampler_indices_from_permutation({4, 2, 0, 3, 1}, 2, 1, false), (V{2, 3, 4}));
  EXPECT_EQ(sampler_indices_from_permutation({4, 2, 0, 3, 1}, 2, 1, true), (V{2, 3}));
}

TEST(DataSampler, EmptyDataset) {
  EXPECT_TRUE(sampler_indices(0, 4, 3, true, 1, 2, false).empty());
  EXPECT_TRUE(sampler_indices(0, 4, 3, false, 1, 2, true).empty());
}

TEST(DataSampler, BadArguments) {
  EXPECT_THROW(sampler_indices(10, 0, 0, false, 0, 0, false), dp::DpError);
  EXPECT_THROW(sampler_indices(10, 3, 3, false, 0, 0, false), dp::DpError);
  EXPECT_THROW(sampler_indices(10, 3, -1, false, 0, 0, false), dp::DpError);
}

TEST(DataSampler, EveryIndexCoveredAndRanksEqual) {
  for (int64_t n : {1, 2, 7, 10, 64, 101, 1000}) {
    for (int world : {1, 2, 3, 4, 5, 8, 16}) {
      for (bool drop : {false, true}) {
        for (bool shuffle : {false, true}) {
          const int64_t per = sampler_num_samples(n, world, drop);
          EXPECT_EQ(per, drop ? n / world : (n + world - 1) / world);
          std::vector<int> seen(n, 0);
          for (int r = 0; r < world; ++r) {
            V idx = sampler_indices(n, world, r, shuffle, 17, 3, drop);
            ASSERT_EQ(static_cast<int64_t>(idx.size()), per) << n << " " << world << " " << r;
            for (auto i : idx) {
              ASSERT_TRUE(i >= 0 && i < n);
              seen[i]++;
            }
          }
          // Without drop_last every index appears once or (padding) twice; with it, at most once,
          // and exactly n - n % world distinct indices are seen.
          const int64_t distinct = std::count_if(seen.begin(), seen.end(), [](int c) { return c > 0; });
          const int64_t total = std::accumulate(seen.begin(), seen.end(), int64_t{0});
          EXPECT_EQ(total, per * world);
          if (drop) {
            EXPECT_EQ(distinct, per * world) << n << " " << world;
            EXPECT_LE(*std::max_element(seen.begin(), seen.end()), 1);
          } else {
            EXPECT_EQ(distinct, n) << n << " " << world;
            if (world <= n) {
              EXPECT_LE(*std::max_element(seen.begin(), seen.end()), 2);
            }
          }
        }
      }
    }
  }
}

TEST(DataSampler, PermutationIsAPermutation) {
  for (int64_t n : {0, 1, 2, 3, 10, 1000}) {
    V p = sampler_permutation(n, 123, 7);
    V sorted = p;
    std::sort(sorted.begin(), sorted.end());
    V iota(n);
    std::iota(iota.begin(), iota.end(), int64_t{0});
    EXPECT_EQ(sorted, iota) << n;
  }
}

TEST(DataSampler, SameSeedAndEpochSameOrder) {
  EXPECT_EQ(sampler_permutation(1000, 42, 3), sampler_permutation(1000, 42, 3));
  EXPECT_EQ(sampler_indices(1000, 4, 2, true, 42, 3, false), sampler_indices(1000, 4, 2, true, 42, 3, false));
}

TEST(DataSampler, DifferentEpochsAndSeedsDifferentOrders) {
  const V e0 = sampler_permutation(1000, 42, 0);
  EXPECT_NE(e0, sampler_permutation(1000, 42, 1));
  EXPECT_NE(e0, sampler_permutation(1000, 43, 0));
  // Unlike torch's generator seeded with seed + epoch, (1, 0) and (0, 1) are different streams.
  EXPECT_NE(sampler_permutation(1000, 1, 0), sampler_permutation(1000, 0, 1));
  // Shuffled at all: few fixed points (expected 1 for a uniform permutation).
  int fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed += e0[i] == i;
  EXPECT_LT(fixed, 10);
}

TEST(DataSampler, PermutationIsPinned) {
  // The order is part of a checkpoint's meaning (resume replays the same epoch order): a
  // change to the RNG or the shuffle shows up here.
  EXPECT_EQ(sampler_permutation(10, 42, 0), (V{6, 8, 4, 7, 3, 2, 1, 5, 9, 0}));
  EXPECT_EQ(sampler_permutation(10, 42, 1), (V{1, 3, 5, 2, 9, 8, 7, 4, 0, 6}));
}

TEST(DataSampler, FisherYatesIsUniform) {
  // All 6 orders of 3 items over 6000 epochs: each expected 1000 times, sd ~ 29.
  std::map<V, int> counts;
  for (uint64_t e = 0; e < 6000; ++e) counts[sampler_permutation(3, 9, e)]++;
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [perm, c] : counts) {
    EXPECT_GT(c, 880);
    EXPECT_LT(c, 1120);
  }
  // Position of item 0 in a 10-item shuffle is uniform too.
  std::vector<int> pos(10, 0);
  for (uint64_t e = 0; e < 10000; ++e) {
    V p = sampler_permutation(10, 1, e);
    pos[std::find(p.begin(), p.end(), 0) - p.begin()]++;
  }
  for (int c : pos) {
    EXPECT_GT(c, 880);
    EXPECT_LT(c, 1120);
  }
}

TEST(DataSampler, ShuffledRanksAreStridesOfThePermutation) {
  const V perm = sampler_permutation(101, 5, 2);
  for (int r = 0; r < 4; ++r) {
    V idx = sampler_indices(101, 4, r, true, 5, 2, false);
    ASSERT_EQ(idx.size(), 26u);
    for (size_t i = 0; i < idx.size(); ++i) EXPECT_EQ(idx[i], perm[(r + i * 4) % 101]);
  }
}
