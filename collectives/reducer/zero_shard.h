// defines: ZeroShard, ZeRO stage 1 (train.zero = 1) around the Reducer: each rank keeps the
// optimizer state of its pieces of the flat arena only (collectives/reducer/shard_layout.h: block
// `rank` of every bucket, the ring all-reduce's own cut), and a step is
//   backward: the Reducer reduce-scatters each bucket in place as backward completes it
//             (ReducerOptions::shard; same bucket order and overlap as the all-reduce), so the
//             rank's pieces of the gradient arena hold the average, in zero 0's summation order;
//   clip:     the global norm from the pieces, the squared sums all-reduced (one f64), so every
//             rank clips its pieces by the same coefficient;
//   update:   the optimizer over the pieces (Optimizer::step_pieces: one step count, the same
//             element math);
//   gather:   every bucket's parameters all-gathered in place before the next forward.
// Gradient accumulation: the Reducer runs on the last micro-batch only, as at zero 0.
//
// Bits: each owned element's gradient is summed as zero 0 sums it, and the update is elementwise,
// so the parameters are zero 0's as long as the clip coefficient is: that coefficient is a float
// rounded from a double norm whose squares are summed in another grouping here (per piece, then
// over ranks) than zero 0's fixed order (kernels/grad_norm_math.h). Both double sums of the same
// exact squares (a float's square is exact in double) lie within (n-1) 2^-53 of the exact sum,
// so they differ by ~1e-10 relative at most for n = 1e6, and the float coefficient differs only
// when the double lands that close to a float rounding boundary (odds ~1e-3 per clipped step
// at that size, far fewer for small models; deterministic for a given run either way).
//
// Checkpoints stay zero 0's format (full arena-order state on rank 0): gather_state assembles the
// whole state in a whole-arena optimizer on the ranks that write (rank 0, and every rank with
// replicas; one transient copy there, at save time; the other ranks pass one scratch tensor),
// take_pieces takes a rank's pieces of a whole optimizer (resume).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/reducer/shard_layout.h"
#include "runtime/optim/optimizer.h"

namespace dp {

class ZeroShard {
 public:
  ZeroShard(Communicator& comm, const std::vector<Bucket>& buckets, int64_t arena_numel);
  const ShardLayout& layout() const { return layout_; }
  const std::vector<optim::ArenaPiece>& pieces() const { return pieces_; }

  // train.grad_clip over the rank's pieces of `grads` (the flat arena, after the reduce-scatter):
  // returns the global norm before clipping; collective (one all-reduce of a double).
  double clip(const Tensor& grads, double max_norm);
  // The update of the rank's pieces of params (opt: the shard's optimizer, numel() = layout().numel).
  void step(optim::Optimizer& opt, const Tensor& params, const Tensor& grads, double lr);
  // Every bucket of params all-gathered in place (collective); returns when all are done.
  void gather_params(const Tensor& params);

  // The shard optimizer's state assembled in arena order into `whole`'s state tensors (through
  // their views, one tensor at a time), with its step count: collective. whole null (a rank that
  // writes nothing): the collective part only, through one scratch tensor of the arena's size.
  void gather_state(const optim::Optimizer& shard, optim::Optimizer* whole);
  // Loads the rank's pieces of `full`'s state (and its step count) into `shard`.
  void take_pieces(const optim::Optimizer& full, optim::Optimizer& shard) const;

 private:
  Communicator& comm_;
  std::vector<Bucket> buckets_;
  int64_t arena_numel_;
  ShardLayout layout_;
  std::vector<optim::ArenaPiece> pieces_;
};

}  // namespace dp
