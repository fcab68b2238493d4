// What train.zero shards per rank, planned (collectives/reducer/zero_memory.h): exact bytes for
// buckets cut by assign_buckets, worked out by hand from ring_block's blocks (the first count % N
// blocks one element longer, block r to rank r) and, at stage 2, the replay of backward: slots
// resident from their first write, a bucket launched when complete and released when the next one
// is launched.
#include <gtest/gtest.h>

#include <vector>

#include "collectives/reducer/buckets.h"
#include "collectives/reducer/zero_memory.h"

namespace dp {
namespace {

// 8 slots of 1000 elements, one bucket each: P = 8000.
std::vector<Bucket> even_buckets() { return assign_buckets(std::vector<int64_t>(8, 1000), 1000, 1000); }

// A layer per slot, backward from the last: each writes its slot and reports it ready.
std::vector<ZeroBackwardNode> layer_per_slot(int slots) {
  std::vector<ZeroBackwardNode> out;
  for (int s = slots - 1; s >= 0; --s) out.push_back({{s}, {s}});
  return out;
}

// AdamW over slots of `numel` (arena order), a layer each.
ZeroMemoryQuery adamw(int zero, int world, std::vector<int64_t> numel = std::vector<int64_t>(8, 1000)) {
  int64_t p = 0;
  for (int64_t n : numel) p += n;
  const int slots = static_cast<int>(numel.size());
  return ZeroMemoryQuery{.zero = zero, .world = world, .arena_elements = p, .state_per_element = 2,
                         .slot_numel = std::move(numel), .backward = layer_per_slot(slots)};
}

TEST(ZeroMemory, ZeroZeroAndOneRankShardNothing) {
  for (const ZeroMemoryQuery& q : {adamw(0, 4), adamw(1, 1), adamw(2, 1)}) {
    ZeroMemoryQuery mixed = q;
    mixed.master_weights = true;
    const ZeroRankBytes z = zero_rank_bytes(even_buckets(), mixed);
    EXPECT_EQ(z.shard_elements, 8000);
    EXPECT_EQ(z.optimizer_state, 64000u);  // two f32 moments
    EXPECT_EQ(z.master_weights, 32000u);
    EXPECT_EQ(z.gradients, 32000u);
    EXPECT_EQ(z.in_flight_elements, 0);
  }
}

TEST(ZeroMemory, StageOneShardsTheStateAndTheMastersNotTheGradients) {
  ZeroMemoryQuery q = adamw(1, 4);
  q.master_weights = true;
  const ZeroRankBytes z = zero_rank_bytes(even_buckets(), q);
  EXPECT_EQ(z.shard_elements, 2000);
  EXPECT_EQ(z.optimizer_state, 16000u);
  EXPECT_EQ(z.master_weights, 8000u);
  EXPECT_EQ(z.gradients, 32000u);
  q.master_weights = false, q.state_per_element = 1;  // SGD with momentum, fp32
  EXPECT_EQ(zero_rank_bytes(even_buckets(), q).optimizer_state, 8000u);
  EXPECT_EQ(zero_rank_bytes(even_buckets(), q).master_weights, 0u);
  q.state_per_element = 0;  // plain SGD
  EXPECT_EQ(zero_rank_bytes(even_buckets(), q).optimizer_state, 0u);
}

TEST(ZeroMemory, StageTwoGradientsAreTheShardAndTwoAdjacentBucketsInFlight) {
  // A bucket per layer: at each poll the one launched before and the one just written are
  // resident. 4 ranks: 250 of each bucket owned, 750 foreign; the high: 2000 + 2 x 750 elements.
  const ZeroRankBytes four = zero_rank_bytes(even_buckets(), adamw(2, 4));
  EXPECT_EQ(four.shard_elements, 2000);
  EXPECT_EQ(four.in_flight_elements, 1500);
  EXPECT_EQ(four.gradients, 14000u);
  EXPECT_EQ(four.optimizer_state, 16000u);
  // 3 ranks: blocks 334, 333, 333. Rank 0: 8 x 334 = 2672 owned, 2 x 666 in flight = 4004;
  // ranks 1 and 2: 2664 + 2 x 667 = 3998. The largest: rank 0's.
  const ZeroRankBytes three = zero_rank_bytes(even_buckets(), adamw(2, 3));
  EXPECT_EQ(three.shard_elements, 2672);  // ceil(8000 / 3) = 2667, + 5: one element in 5 of the 8 buckets
  EXPECT_EQ(three.optimizer_state, 2672u * 8);
  EXPECT_EQ(three.in_flight_elements, 1332);
  EXPECT_EQ(three.gradients, 4004u * 4);
}

TEST(ZeroMemory, StageTwoUnevenBucketsCountTheWrittenSlotsForeignElements) {
  // Slots 5, 1000, 7, 3001: buckets [1012, 4013) of 3001 (slot 3), [5, 1012) of 1007 (slots 2 and
  // 1), [0, 5) of 5 (slot 0).
  const std::vector<Bucket> b = assign_buckets({5, 1000, 7, 3001}, 3000, 1000);
  ASSERT_EQ(b.size(), 3u);
  // 2 ranks. Rank 0 owns [1012, 2513), [5, 509), [0, 3): 2008 elements; foreign: slot 3 1500, slot 2
  // 7, slot 1 496, slot 0 2. Backward: slot 3 (bucket 0 launched); slot 2 written (1507 resident,
  // no launch: nothing released); slot 1 written, bucket 1 launched, bucket 0 released (1500 + 7 +
  // 496); slot 0 written, bucket 2 launched, bucket 1 released (7 + 496 + 2): the high 2003,
  // 2008 + 2003 = 4011. Rank 1 owns 1500 + 503 + 2 = 2005 (all of slot 2); foreign 1501, 0, 504, 3:
  // the high 2005, 4010.
  const ZeroRankBytes z = zero_rank_bytes(b, adamw(2, 2, {5, 1000, 7, 3001}));
  EXPECT_EQ(z.shard_elements, 2008);
  EXPECT_EQ(z.optimizer_state, 16064u);
  EXPECT_EQ(z.in_flight_elements, 2003);
  EXPECT_EQ(z.gradients, 4011u * 4);
  // Stage 1 keeps the whole arena.
  EXPECT_EQ(zero_rank_bytes(b, adamw(1, 2, {5, 1000, 7, 3001})).gradients, 4013u * 4);
}

TEST(ZeroMemory, StageTwoHoldsTheWholeArenaWithoutOverlapOrWithAccumulation) {
  ZeroMemoryQuery q = adamw(2, 4);
  q.overlap = false;
  EXPECT_EQ(zero_rank_bytes(even_buckets(), q).gradients, 32000u);
  EXPECT_EQ(zero_rank_bytes(even_buckets(), q).optimizer_state, 16000u);  // still sharded
  q.overlap = true, q.accumulates = true;
  EXPECT_EQ(zero_rank_bytes(even_buckets(), q).gradients, 32000u);
  // One bucket: in flight it is all of it.
  EXPECT_EQ(zero_rank_bytes(assign_buckets({100}, 1000, 1000), adamw(2, 2, {100})).gradients, 400u);
}

// A head tied to the embedding (GPT's lm_head and wte) writes the embedding's gradient first in
// backward, and its bucket, launched last, stays resident throughout. Slots: wte 100, then three
// layers of 50; buckets of 50: [200, 250), [150, 200), [100, 150), [0, 100). 2 ranks: shard 125,
// foreign 25, 25, 25, 50.
TEST(ZeroMemory, StageTwoTiedParametersStayInFlightFromTheirFirstWrite) {
  const std::vector<Bucket> b = assign_buckets({100, 50, 50, 50}, 50, 50);
  ASSERT_EQ(b.size(), 4u);
  ZeroMemoryQuery q = adamw(2, 2, {100, 50, 50, 50});
  // Without the head: the high is bucket 2 just written beside wte's (25 + 50) at bucket 2's release.
  EXPECT_EQ(zero_rank_bytes(b, q).gradients, (125u + 75u) * 4);
  // The head (tied to slot 0, no parameters of its own: no poll) first: wte's 50 resident from the
  // start, + 25 + 25 at bucket 0's release.
  q.backward.insert(q.backward.begin(), ZeroBackwardNode{{0}, {}});
  EXPECT_EQ(zero_rank_bytes(b, q).gradients, (125u + 100u) * 4);
  EXPECT_EQ(zero_rank_bytes(b, q).in_flight_elements, 100);
  q.overlap = false;  // every bucket launched after backward: all of them resident then
  EXPECT_EQ(zero_rank_bytes(b, q).gradients, 250u * 4);
}

TEST(ZeroMemory, BucketsThatDoNotCoverTheArenaAreRefused) {
  ZeroMemoryQuery q = adamw(1, 2);
  q.arena_elements = 8001;
  EXPECT_THROW(zero_rank_bytes(even_buckets(), q), std::exception);
  EXPECT_THROW(zero_rank_bytes(even_buckets(), adamw(3, 2)), std::exception);
}

}  // namespace
}  // namespace dp
