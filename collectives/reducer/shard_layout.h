// defines: ShardLayout and shard_layout, the pure function that says which elements of the flat
// parameter arena a rank owns under ZeRO (train.zero = 1 and 2): the elements whose optimizer
// state it keeps and updates (and, at stage 2, whose gradients it keeps: foreign_spans are the rest).
//
// Why per-bucket blocks and not one contiguous 1/N of the arena: zero 1 must give the bits of
// zero 0 (DDP). Zero 0 all-reduces each bucket; the ring all-reduce cuts a bucket of c elements
// into N blocks (ring_block: the first c % N blocks one element longer) and sums block j along the
// ring from rank j+1 (collectives/ring/algorithms.h), so an element's summation order depends on
// its block within its bucket. Rank r owning block r of every bucket, the reduce-scatter is the
// all-reduce's own first half, in place (Communicator::reduce_scatter_blocks_async): each owned
// element is summed in exactly the order zero 0 sums it, and the parameter all-gather is the
// all-reduce's second half. A contiguous 1/N of the arena would cut buckets elsewhere than the
// ring does, and for N >= 3 sum some elements in another order (IEEE addition of three or more
// values depends on the grouping). So: no padding at all (the blocks are uneven by at most one
// element per bucket); the shard is ceil(P / N) elements give or take one per bucket; the rank's
// state is its pieces side by side, in bucket order (the arena's end first, as backward fills it).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "collectives/reducer/buckets.h"

namespace dp {

struct ShardPiece {
  int bucket = 0;
  int64_t arena_begin = 0;  // first element in the flat arena
  int64_t len = 0;          // elements (0 when the bucket has fewer elements than ranks)
  int64_t shard_begin = 0;  // first element in the rank's shard (its optimizer state)
};

struct ShardLayout {
  int world = 1, rank = 0;
  std::vector<ShardPiece> pieces;  // one per bucket, in bucket order
  int64_t numel = 0;               // the shard's elements: the pieces' total length
};

// Block `rank` of every bucket, as the ring all-reduce cuts it (ring::ring_block). world >= 1,
// 0 <= rank < world.
ShardLayout shard_layout(const std::vector<Bucket>& buckets, int world, int rank);

// The elements of `bucket` that the rank owning `piece` (its piece of that bucket) does not own:
// the spans [begin, end) of the arena before and after the piece, in arena order, empty ones left
// out (an empty piece: the whole bucket, one span). ZeRO stage 2 gives their pages back after the
// bucket's reduce-scatter.
std::vector<std::pair<int64_t, int64_t>> foreign_spans(const Bucket& bucket, const ShardPiece& piece);

// Arena spans (sorted, disjoint [begin, end)) as spans of the shard's elements, sorted and merged
// where they touch: weight decay's skipped spans for the rank's optimizer.
std::vector<std::pair<int64_t, int64_t>> arena_spans_in_shard(const ShardLayout& layout,
                                                             const std::vector<std::pair<int64_t, int64_t>>& spans);

}  // namespace dp
