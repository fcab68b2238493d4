// defines: ZeroShard, ZeRO stages 1 and 2 (train.zero = 1, 2) around the Reducer: each rank keeps
// the optimizer state of its pieces of the flat arena only (collectives/reducer/shard_layout.h:
// block `rank` of every bucket, the ring all-reduce's own cut), and a step is
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
// Stage 2 (train.zero = 2): the gradients are sharded too. The gradient arena keeps its virtual
// layout (layers accumulate into views of it, the buckets are its slices) on a page mapping of its
// own (ArenaMemory::Paged, base/pages.h), and as soon as a bucket's reduce-scatter is complete
// (ReducerOptions::on_reduced, on the training thread) release_grads gives back the whole pages of
// the bucket's elements the rank does not own (madvise MADV_DONTNEED; the partial pages at their
// ends stay): full-size gradient memory exists only for the buckets backward has written and
// whose reduce-scatter is not complete yet. The pages given back read as zeros, what the next
// step's zero_grad wants: zero_grads writes zeros only where the rank keeps memory (its pieces
// and those partial pages) and gives the rest back again (nothing to do where it already is), so
// it faults nothing in. Accumulation: the micro-batches before the last one run without the
// Reducer and accumulate full-size gradients (all of the arena resident until the last one's
// reduce-scatters give it back), as zero 0 holds them; only the last one's buckets are sharded.
// The bits are stage 1's: the same sums, the owned pieces untouched by the release.
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
// Checkpoints stay zero 0's format (full arena-order state on rank 0): a save streams the state a
// bucket at a time into the file as it is written (stream_state, runtime/checkpoint CheckpointStream:
// rank 0 and every rank with replicas write what arrives; each rank holds one bucket-sized scratch
// tensor on top of its shard; checkpoint.async's host snapshot on rank 0, a whole copy by design,
// is filled from the same stream).
// A resume reads each rank's pieces of the file straight into its shard optimizer
// (load_checkpoint with pieces(): one tensor of the file in memory at a time; the tests compare it
// with the pieces cut from a whole optimizer, tests/collectives/reducer/take_pieces.h).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/reducer/shard_layout.h"
#include "runtime/optim/grad_clip.h"
#include "runtime/optim/optimizer.h"

namespace dp {

class ZeroShard {
 public:
  // stage: 1 or 2 (2: release_grads and zero_grads are for use).
  ZeroShard(Communicator& comm, const std::vector<Bucket>& buckets, int64_t arena_numel, int stage = 1);
  int stage() const { return stage_; }
  const ShardLayout& layout() const { return layout_; }
  const std::vector<optim::ArenaPiece>& pieces() const { return pieces_; }

  // train.grad_clip over the rank's pieces of `grads` (the flat arena, after the reduce-scatter;
  // on a GPU with cuda_stream its cudaStream_t) by the clipper's GradClipper::clip_pieces: returns
  // the global norm before clipping; collective (one all-reduce of a double).
  double clip(const Tensor& grads, optim::GradClipper& clipper, void* cuda_stream = nullptr);
  // The update of the rank's pieces of params (opt: the shard's optimizer, numel() = layout().numel).
  void step(optim::Optimizer& opt, const Tensor& params, const Tensor& grads, double lr);
  // Every bucket of params all-gathered in place (collective); returns when all are done. On a
  // GPU, cuda_stream: the stream the update ran on (its cudaStream_t), synchronised first (the
  // communicator reads the pieces as the update left them); afterwards every stream sees them.
  void gather_params(const Tensor& params, void* cuda_stream = nullptr);

  // Stage 2; grads: the flat f32 gradient arena on its own page mapping (Tensor::zeros_paged).
  // Bucket `bucket`'s reduce-scatter is complete: the whole pages of its elements this rank does
  // not own are given back. First, while measure_peak is on, the mapping's resident bytes are
  // measured (the memory account's peak: the step's high lies just before one of these releases).
  // Returns the bytes given back.
  size_t release_grads(int bucket, const Tensor& grads);
  // On (the default): release_grads measures the arena (mincore over all of it, once per bucket).
  // The trainer turns it on for the step whose memory account it logs only.
  void measure_peak(bool on) { measure_peak_ = on; }
  // Stage 2's zero_grad (instead of Graph::zero_grad, which would fault every page in): zeros
  // written where the rank keeps memory (its pieces, the partial pages around the rest), the rest
  // given back again. The whole arena reads as zeros afterwards.
  void zero_grads(const Tensor& grads);
  // The most gradient bytes stage 2 keeps resident between steps: the rank's pieces and, per
  // bucket, the partial pages around them (at most 3 pages: the two ends of its piece and one
  // straddling the bucket's end, where another bucket's foreign span starts).
  int64_t kept_grad_bytes_bound() const;

  // The whole optimizer state a bucket at a time: for each of the shard optimizer's state tensors
  // (slot k of state()) and each bucket in arena order, the bucket's elements all-gathered in
  // place into one scratch tensor of the largest bucket's size and handed to
  // sink(k, the bucket's first arena element, data (host memory), its length). Collective; a
  // rank that keeps nothing passes a null sink. The state may be on a GPU (nccl gathers there,
  // the ring on the host; the bucket comes to the host for the sink). A checkpoint save writes what arrives (CheckpointStream), so no
  // rank holds more of the state than its shard and one bucket.
  using StateSink = optim::StateSink;
  void stream_state(const optim::Optimizer& shard, const StateSink& sink);

 private:
  void check_paged(const Tensor& grads) const;
  Communicator& comm_;
  std::vector<Bucket> buckets_;
  int64_t arena_numel_;
  int stage_;
  bool measure_peak_ = true;
  ShardLayout layout_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> foreign_;  // per bucket: foreign_spans
  std::vector<optim::ArenaPiece> pieces_;
};

}  // namespace dp
