// defines: ZeroMemoryQuery, ZeroRankBytes and zero_rank_bytes, the pure arithmetic of what
// train.zero shards per rank, for `dptrain memory` (launch/memory_estimate.h): the optimizer
// state, the fp32 master weights (16-bit training) and the fp32 gradient arena. The shard is the
// runtime's own (shard_layout.h: block `rank` of every bucket as the ring cuts it, no padding; a
// rank's shard is ceil(P / N) elements give or take one per bucket), the figures the most any
// rank holds (rank 0's: the ring's first blocks are the longer ones).
//
// Stage 2's gradients at the step's high, as the runtime runs them (zero_shard.h, reducer.h): a
// bucket's full-size pages are resident from backward's first write into it (a layer writes its
// own parameters' gradients and those of the parameters it is tied to: lm_head writes wte's at the
// start of backward) until on_reduced reports its reduce-scatter complete, and release_grads gives
// back the pages the rank does not own. The Reducer caps nothing in flight; it launches a bucket
// once its last parameter is reported ready and polls for completed ones after each parameter
// layer's backward (the rest in finalize, after the wait). The plan replays that order, a slot's
// foreign elements resident from its first write, on the premise of the overlap (PyTorch DDP's
// too): a bucket's reduction is hidden behind the computation of the next bucket, so it is
// complete, and released, at the poll that launches the next one. The high is the most foreign
// elements resident just before a release (where the runtime measures it).
// A slower ring holds more, a faster one (done within a layer) less; at most the whole arena: what
// dist.overlap = false plans (every bucket launched after backward). With train.accum_steps > 1 the micro-batches before the last one run
// without the Reducer: the whole arena. Not planned: the partial pages a rank keeps around its
// pieces (at most 3 pages per bucket, ZeroShard::kept_grad_bytes_bound).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/reducer/buckets.h"

namespace dp {

// One parameter layer's backward, in backward order: the arena slots whose gradients it writes
// (Graph::Node::bound_slots: its own and the ones it is tied to) and those it reports ready
// (param_slots: its own; none, and so no poll, for a layer with tied parameters only).
struct ZeroBackwardNode {
  std::vector<int> writes, ready;
};

struct ZeroMemoryQuery {
  int zero = 0;                   // train.zero: 0, 1 or 2
  int world = 1;                  // ranks
  int64_t arena_elements = 0;     // P: the flat parameter (and gradient) arena, the buckets' union
  int64_t state_per_element = 0;  // f32 optimizer state per parameter: AdamW 2, SGD with momentum 1
  bool master_weights = false;    // 16-bit training: an fp32 master copy of the parameters
  bool overlap = true;            // dist.overlap: buckets reduced while backward runs
  bool accumulates = false;       // train.accum_steps > 1
  std::vector<int64_t> slot_numel;         // stage 2: the arena's slots, in arena order (assign_buckets')
  std::vector<ZeroBackwardNode> backward;  // stage 2: the parameter layers, in backward order
};

struct ZeroRankBytes {
  int64_t shard_elements = 0;      // the largest rank's shard (P when nothing is sharded)
  int64_t in_flight_elements = 0;  // stage 2: full-size gradient elements beyond the shard at the high
  size_t optimizer_state = 0;      // shard_elements x state_per_element x 4
  size_t master_weights = 0;       // shard_elements x 4 in 16-bit training, else 0
  size_t gradients = 0;            // the fp32 arena: P x 4, or at stage 2 (shard + in flight) x 4
};

// Nothing is sharded at zero 0 or on one rank. `buckets`: the Reducer's (reducer_buckets), which
// partition [0, arena_elements); at stage 2 every one of their slots is reported ready by exactly
// one node of q.backward. Pure.
ZeroRankBytes zero_rank_bytes(const std::vector<Bucket>& buckets, const ZeroMemoryQuery& q);

}  // namespace dp
