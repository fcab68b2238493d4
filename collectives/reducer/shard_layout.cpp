#include "collectives/reducer/shard_layout.h"

#include <algorithm>

#include "base/error.h"
#include "collectives/ring/algorithms.h"

namespace dp {

ShardLayout shard_layout(const std::vector<Bucket>& buckets, int world, int rank) {
  DP_CHECK(world >= 1 && rank >= 0 && rank < world, "shard layout: rank {} of a world of {}", rank, world);
  ShardLayout out;
  out.world = world, out.rank = rank;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const ring::Block blk = ring::ring_block(buckets[b].end - buckets[b].begin, world, rank);
    out.pieces.push_back({static_cast<int>(b), buckets[b].begin + blk.begin, blk.len, out.numel});
    out.numel += blk.len;
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> foreign_spans(const Bucket& bucket, const ShardPiece& piece) {
  DP_CHECK(piece.arena_begin >= bucket.begin && piece.arena_begin + piece.len <= bucket.end,
           "shard piece [{}, {}) outside its bucket [{}, {})", piece.arena_begin, piece.arena_begin + piece.len,
           bucket.begin, bucket.end);
  std::vector<std::pair<int64_t, int64_t>> out;
  if (piece.len == 0) {  // nothing owned: one span (two halves would keep the page across their seam)
    if (bucket.begin < bucket.end) out.emplace_back(bucket.begin, bucket.end);
    return out;
  }
  if (bucket.begin < piece.arena_begin) out.emplace_back(bucket.begin, piece.arena_begin);
  if (piece.arena_begin + piece.len < bucket.end) out.emplace_back(piece.arena_begin + piece.len, bucket.end);
  return out;
}

std::vector<std::pair<int64_t, int64_t>> arena_spans_in_shard(const ShardLayout& layout,
                                                             const std::vector<std::pair<int64_t, int64_t>>& spans) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const ShardPiece& pc : layout.pieces)
    for (const auto& [b, e] : spans) {
      const int64_t lo = std::max(b, pc.arena_begin), hi = std::min(e, pc.arena_begin + pc.len);
      if (lo < hi) out.emplace_back(pc.shard_begin + lo - pc.arena_begin, pc.shard_begin + hi - pc.arena_begin);
    }
  std::sort(out.begin(), out.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& s : out) {
    if (!merged.empty() && merged.back().second == s.first) merged.back().second = s.second;
    else merged.push_back(s);
  }
  return merged;
}

}  // namespace dp
