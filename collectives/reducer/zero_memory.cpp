#include "collectives/reducer/zero_memory.h"

#include <algorithm>

#include "base/error.h"
#include "collectives/reducer/shard_layout.h"

namespace dp {
namespace {

// Stage 2's replay of one step's backward for one rank (zero_memory.h): the most foreign elements
// resident just before a release. A slot's foreign elements become resident when a layer writes
// it; a bucket's go back when it is released.
class InFlight {
 public:
  InFlight(const std::vector<Bucket>& buckets, const ShardLayout& layout, const std::vector<int64_t>& slot_numel)
      : foreign_(slot_numel.size(), 0), bucket_of_(slot_numel.size(), -1), written_(slot_numel.size(), 0),
        launched_(buckets.size(), 0), pending_(buckets.size(), 0), slots_(buckets.size()) {
    std::vector<int64_t> begin(slot_numel.size() + 1, 0);
    for (size_t s = 0; s < slot_numel.size(); ++s) begin[s + 1] = begin[s] + slot_numel[s];
    for (size_t b = 0; b < buckets.size(); ++b) {
      const ShardPiece& pc = layout.pieces[b];
      pending_[b] = static_cast<int>(buckets[b].slots.size());
      slots_[b] = buckets[b].slots;
      for (int s : buckets[b].slots) {
        DP_CHECK(s >= 0 && static_cast<size_t>(s) < slot_numel.size(), "ZeRO memory: slot {} of {}", s,
                 slot_numel.size());
        const size_t i = static_cast<size_t>(s);
        const int64_t owned = std::max<int64_t>(
            0, std::min(begin[i + 1], pc.arena_begin + pc.len) - std::max(begin[i], pc.arena_begin));
        foreign_[i] = slot_numel[i] - owned;
        bucket_of_[i] = static_cast<int>(b);
      }
    }
  }

  int64_t replay(const std::vector<ZeroBackwardNode>& backward, bool overlap) {
    for (const ZeroBackwardNode& n : backward) {
      for (int s : n.writes) write(s);
      if (n.ready.empty()) continue;  // no on_ready: no poll
      std::vector<int> now;
      for (int s : n.ready) {
        const size_t b = static_cast<size_t>(bucket(s));
        DP_CHECK(pending_[b] > 0, "ZeRO memory: slot {} reported ready twice", s);
        if (--pending_[b] == 0 && overlap) now.push_back(static_cast<int>(b));
      }
      if (now.empty()) continue;
      for (size_t b = 0; b < launched_.size(); ++b)  // launched before this bucket: complete by now
        if (launched_[b] == 1) release(b);
      for (int b : now) launched_[static_cast<size_t>(b)] = 1;
    }
    for (size_t b = 0; b < launched_.size(); ++b)  // finalize: the rest launched, waited for, released
      if (launched_[b] != 2) release(b);
    return most_;
  }

 private:
  int bucket(int s) const {
    DP_CHECK(s >= 0 && static_cast<size_t>(s) < bucket_of_.size() && bucket_of_[static_cast<size_t>(s)] >= 0,
             "ZeRO memory: slot {} is in no bucket", s);
    return bucket_of_[static_cast<size_t>(s)];
  }
  void write(int s) {
    const size_t b = static_cast<size_t>(bucket(s)), i = static_cast<size_t>(s);
    if (written_[i] || launched_[b] == 2) return;
    written_[i] = 1;
    resident_ += foreign_[i];
  }
  void release(size_t b) {  // the runtime measures just before each release
    most_ = std::max(most_, resident_);
    for (int s : slots_[b])
      if (written_[static_cast<size_t>(s)]) resident_ -= foreign_[static_cast<size_t>(s)];
    launched_[b] = 2;
  }
  std::vector<int64_t> foreign_;       // per slot: its elements outside the rank's piece of its bucket
  std::vector<int> bucket_of_;         // per slot
  std::vector<char> written_;          // per slot: resident since backward wrote it
  std::vector<char> launched_;         // per bucket: 0 not yet, 1 in flight, 2 released
  std::vector<int> pending_;           // per bucket: slots not yet reported ready
  std::vector<std::vector<int>> slots_;
  int64_t resident_ = 0, most_ = 0;
};

// The rank's full-size gradient elements at stage 2's high: its pieces and what is in flight.
int64_t stage2_elements(const std::vector<Bucket>& buckets, const ShardLayout& layout, const ZeroMemoryQuery& q) {
  return layout.numel + InFlight(buckets, layout, q.slot_numel).replay(q.backward, q.overlap);
}

}  // namespace

ZeroRankBytes zero_rank_bytes(const std::vector<Bucket>& buckets, const ZeroMemoryQuery& q) {
  DP_CHECK(q.zero >= 0 && q.zero <= 2 && q.world >= 1 && q.arena_elements >= 0 && q.state_per_element >= 0,
           "ZeRO memory: train.zero = {} on {} ranks over {} elements ({} state per element)", q.zero, q.world,
           q.arena_elements, q.state_per_element);
  int64_t covered = 0;
  for (const Bucket& b : buckets) covered += b.end - b.begin;
  DP_CHECK(covered == q.arena_elements, "ZeRO memory: the buckets hold {} elements, the arena {}", covered,
           q.arena_elements);
  ZeroRankBytes out;
  out.shard_elements = q.arena_elements;
  int64_t grads = q.arena_elements;
  if (q.zero > 0 && q.world > 1) {
    const bool stage2 = q.zero == 2 && !q.accumulates;
    int64_t shard = 0, high = 0;
    for (int r = 0; r < q.world; ++r) {
      const ShardLayout layout = shard_layout(buckets, q.world, r);
      shard = std::max(shard, layout.numel);
      if (stage2) high = std::max(high, stage2_elements(buckets, layout, q));
    }
    out.shard_elements = shard;
    if (stage2) grads = high, out.in_flight_elements = high - shard;
  }
  const auto f32 = [](int64_t n) { return static_cast<size_t>(n) * sizeof(float); };
  out.optimizer_state = f32(out.shard_elements * q.state_per_element);
  out.master_weights = q.master_weights ? f32(out.shard_elements) : 0;
  out.gradients = f32(grads);
  return out;
}

}  // namespace dp
