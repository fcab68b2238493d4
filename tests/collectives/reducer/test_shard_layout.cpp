// ZeRO's shard layout (collectives/reducer/shard_layout.h): rank r owns the ring all-reduce's
// block r of every bucket; the ranks' pieces partition the arena; decay spans move into the shard.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "base/error.h"
#include "collectives/reducer/buckets.h"
#include "collectives/reducer/shard_layout.h"
#include "collectives/ring/algorithms.h"

namespace dp {
namespace {

// Slots of uneven sizes (a tiny CNN's), cut into buckets of about 40 elements.
std::vector<Bucket> some_buckets() { return assign_buckets({7, 3, 50, 1, 13, 29, 2}, 10, 40); }

TEST(ShardLayout, RankOwnsTheRingAllreducesBlockOfEveryBucket) {
  const std::vector<Bucket> buckets = some_buckets();
  for (int world : {1, 2, 3, 4, 7}) {
    for (int r = 0; r < world; ++r) {
      const ShardLayout l = shard_layout(buckets, world, r);
      ASSERT_EQ(l.pieces.size(), buckets.size());
      int64_t at = 0;
      for (size_t b = 0; b < buckets.size(); ++b) {
        const ring::Block blk = ring::ring_block(buckets[b].end - buckets[b].begin, world, r);
        EXPECT_EQ(l.pieces[b].arena_begin, buckets[b].begin + blk.begin) << world << " " << r << " " << b;
        EXPECT_EQ(l.pieces[b].len, blk.len);
        EXPECT_EQ(l.pieces[b].shard_begin, at);  // side by side, in bucket order
        at += blk.len;
      }
      EXPECT_EQ(l.numel, at);
    }
  }
}

TEST(ShardLayout, PiecesOfAllRanksPartitionTheArenaAndEachIsAboutOneNth) {
  const std::vector<Bucket> buckets = some_buckets();
  const int64_t total = 7 + 3 + 50 + 1 + 13 + 29 + 2;
  for (int world : {2, 3, 5}) {
    std::vector<int> owners(total, 0);
    for (int r = 0; r < world; ++r) {
      const ShardLayout l = shard_layout(buckets, world, r);
      for (const ShardPiece& pc : l.pieces)
        for (int64_t i = pc.arena_begin; i < pc.arena_begin + pc.len; ++i) ++owners[i];
      // ceil(P / N), give or take one element per bucket (no padding)
      const int64_t ceil = (total + world - 1) / world;
      EXPECT_LE(std::abs(l.numel - ceil), static_cast<int64_t>(buckets.size())) << world << " " << r;
    }
    EXPECT_EQ(std::count(owners.begin(), owners.end(), 1), total) << world << " ranks";
  }
}

TEST(ShardLayout, BucketSmallerThanTheWorldLeavesEmptyPieces) {
  const std::vector<Bucket> buckets = assign_buckets({2}, 1, 1);
  EXPECT_EQ(shard_layout(buckets, 3, 0).numel, 1);
  EXPECT_EQ(shard_layout(buckets, 3, 1).numel, 1);
  EXPECT_EQ(shard_layout(buckets, 3, 2).numel, 0);
}

// ZeRO stage 2 gives back the pages of the elements a rank does not own: with its piece they
// cover the bucket exactly, and an empty piece leaves one span (no seam that would keep a page).
TEST(ShardLayout, ForeignSpansAndThePieceCoverTheBucket) {
  const std::vector<Bucket> buckets = some_buckets();
  for (int world : {1, 2, 3, 7})
    for (int r = 0; r < world; ++r) {
      const ShardLayout l = shard_layout(buckets, world, r);
      for (size_t b = 0; b < buckets.size(); ++b) {
        const ShardPiece& pc = l.pieces[b];
        const auto spans = foreign_spans(buckets[b], pc);
        int64_t covered = pc.len;
        for (const auto& [lo, hi] : spans) {
          EXPECT_LT(lo, hi);
          EXPECT_TRUE(hi <= pc.arena_begin || lo >= pc.arena_begin + pc.len) << "overlaps the piece";
          EXPECT_TRUE(lo >= buckets[b].begin && hi <= buckets[b].end);
          covered += hi - lo;
        }
        EXPECT_EQ(covered, buckets[b].end - buckets[b].begin) << world << " " << r << " " << b;
        if (pc.len == 0) {
          EXPECT_EQ(spans.size(), 1u);
        }
      }
    }
  const Bucket whole{10, 40, {0}};
  EXPECT_EQ(foreign_spans(whole, ShardPiece{0, 20, 5, 0}),
            (std::vector<std::pair<int64_t, int64_t>>{{10, 20}, {25, 40}}));
  EXPECT_TRUE(foreign_spans(whole, ShardPiece{0, 10, 30, 0}).empty()) << "the whole bucket owned";
  EXPECT_EQ(foreign_spans(whole, ShardPiece{0, 25, 0, 0}), (std::vector<std::pair<int64_t, int64_t>>{{10, 40}}));
  EXPECT_THROW(foreign_spans(whole, ShardPiece{0, 35, 10, 0}), DpError);
}

TEST(ShardLayout, DecaySpansMoveIntoShardCoordinates) {
  // Two buckets of 6 (arena [6, 12) first, then [0, 6)) on 2 ranks: rank 1 owns [9, 12) then [3, 6),
  // shard elements 0-2 and 3-5.
  const std::vector<Bucket> buckets = assign_buckets({6, 6}, 6, 6);
  ASSERT_EQ(buckets.size(), 2u);
  const ShardLayout l = shard_layout(buckets, 2, 1);
  // Arena spans [4, 5) and [10, 12): shard [4, 5) (arena 4 = shard 3 + 1) and [1, 3).
  EXPECT_EQ(arena_spans_in_shard(l, {{4, 5}, {10, 12}}), (std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {4, 5}}));
  // A span over both pieces' ends joins where the shard's pieces touch: arena [5, 10) -> shard 5 and 0.
  EXPECT_EQ(arena_spans_in_shard(l, {{0, 12}}), (std::vector<std::pair<int64_t, int64_t>>{{0, 6}}));
  EXPECT_TRUE(arena_spans_in_shard(l, {{0, 3}}).empty());
}

}  // namespace
}  // namespace dp
