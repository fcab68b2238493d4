// defines: WeightUpdate, what a step does to the weights once the gradients are reduced (and,
// under fp16, unscaled), behind one interface with two implementations:
//   replicated (train.zero = 0, or one rank): train.grad_clip over the whole gradient arena
//     (runtime/optim/grad_clip.h), then the optimizer over the whole parameter arena; every rank
//     holds the whole optimizer state and makes the same update;
//   sharded (train.zero = 1, 2 on several ranks; collectives/reducer/zero_shard.h): the Reducer
//     reduce-scatters, the clip is over this rank's pieces (one all-reduce of a double), the
//     optimizer updates its pieces, and every bucket's parameters are all-gathered; under stage 2
//     the step's zero_grad writes only where the rank keeps gradient memory.
// Around the step it also owns what differs between the two at set-up, resume and checkpoint:
// the Reducer's options, reading a checkpoint's state (the whole state, or this rank's pieces of
// it) and handing the whole state to a save (as it is, or streamed a bucket at a time; zero 0's
// format either way).
#pragma once
#include <functional>
#include <memory>
#include <optional>

#include "collectives/reducer/reducer.h"
#include "collectives/reducer/zero_shard.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/graph.h"
#include "runtime/optim/grad_clip.h"
#include "runtime/optim/optimizer.h"

namespace dp::launch {

class WeightUpdate {
 public:
  virtual ~WeightUpdate() = default;
  // The optimizer this rank steps: of the whole arena (replicated) or of its pieces (sharded).
  optim::Optimizer& optimizer() const { return *opt_; }
  // The ZeRO shard (its layout, stage, bounds: for the logs), null when replicated.
  virtual const ZeroShard* shard() const { return nullptr; }

  // Set-up: the Reducer's part of the update (sharded: reduce-scatter and, under stage 2, each
  // bucket's foreign gradient pages given back as soon as its reduce-scatter completes). The
  // update must outlive the Reducer made from `ro`.
  virtual void configure_reducer(ReducerOptions& ro) = 0;
  // Resume: the newest good checkpoint of `dir` into the model and this update's optimizer
  // (resume_latest); nullopt when there is none.
  virtual std::optional<ResumePoint> resume(const CheckpointDir& dir) = 0;
  // A streamed save: the whole optimizer state a bucket at a time into `sink` (ZeroShard::
  // stream_state: collective; null sink on a rank that writes nothing). False, and nothing done,
  // where optimizer() is the whole state already (write it as it is).
  virtual bool stream_state(const ZeroShard::StateSink& sink) {
    (void)sink;
    return false;
  }

  // A step. measure_memory: this step's memory account is logged (stage 2 measures its gradient
  // arena at each bucket's release then only). zero_grads: before the step's first micro-batch.
  // step: after the reduced gradients, train.grad_clip and the update; returns the gradient norm
  // before clipping (NaN without clipping).
  virtual void measure_memory(bool) {}
  virtual void zero_grads() = 0;
  virtual double step(double lr) = 0;

 protected:
  // max_norm: train.grad_clip (> 0: clip to it, GradClipper's UserError when not finite; else none).
  WeightUpdate(Graph& model, std::unique_ptr<optim::Optimizer> opt, double max_norm);
  Graph& model_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::optional<optim::GradClipper> clip_;  // train.grad_clip > 0
};

// max_norm: train.grad_clip (as WeightUpdate's). cuda_stream: the compute stream when the arenas are
// on a GPU (the clip's kernels run there), else null.
std::unique_ptr<WeightUpdate> replicated_update(Graph& model, std::unique_ptr<optim::Optimizer> opt, double max_norm,
                                                void* cuda_stream);
// opt: the shard optimizer over shard's layout (train_setup.h make_shard_optimizer); a resume
// loads this rank's pieces straight into it, a save streams the whole state out of it.
// cuda_stream: as replicated_update's (the optimizer placed on that GPU and stream, without
// write_compute_copy: step_pieces writes no 16-bit copy here); stage 1 only on a GPU.
std::unique_ptr<WeightUpdate> sharded_update(Graph& model, std::unique_ptr<ZeroShard> shard,
                                             std::unique_ptr<optim::Optimizer> opt, double max_norm,
                                             void* cuda_stream = nullptr);

}  // namespace dp::launch
