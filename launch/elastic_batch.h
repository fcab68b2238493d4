// defines: train.elastic_batch's rule, as pure functions: the batch plan of a run resumed from a
// checkpoint of another world size (a Slurm job that goes on with fewer nodes: dptrain submit
// --min-nodes, launch/submit.h).
//
// "global" (the default) keeps the checkpoint's global batch G (samples per optimizer step, all
// ranks together). Over W ranks each rank takes s = G / W samples per step; the cfg's
// train.batch_size is the largest micro-batch a rank runs (what fits its memory), so the rank
// accumulates over a = the smallest divisor of s with s / a <= train.batch_size micro-batches of
// s / a. At the world size the cfg was planned for that is the cfg's own batch and accum_steps.
// A W that does not divide G is an error before training starts. "per_rank" keeps
// train.batch_size and accum_steps per rank (the global batch follows the world: before
// train.elastic_batch, the only behaviour).
//
// The rule applies where the checkpoint was written at another world size, or by a run that
// re-planned already (its metadata global_batch): a resume at the checkpoint's own world keeps
// the cfg's plan, as before.
#pragma once
#include <cstdint>
#include <string>

#include "launch/train_setup.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/config.h"

namespace dp::launch {

struct BatchSplit {
  int64_t batch_size = 0;  // per rank and micro-batch
  int64_t accum = 1;       // micro-batches per step
};

// Pure. `global` samples per step over `world` ranks, micro-batches of at most max_batch (see
// above). Throws UserError naming `ckpt_path` when world does not divide global: what, the world
// sizes that do, and train.elastic_batch = "per_rank" with the global batch it would give.
BatchSplit split_global_batch(int64_t global, int world, int64_t max_batch, int64_t cfg_accum,
                              const std::string& ckpt_path);

// Pure. The global batch the checkpoint's run kept: its global_batch, else world_size x
// batch_size x the cfg's accum_steps (that run ran the cfg's plan).
int64_t checkpoint_global_batch(const CheckpointMeta& m, int64_t cfg_accum);

// Pure. The step plan of a run resumed from `m` at `world` ranks: cfg_plan (plan_steps') unless
// train.elastic_batch = "global" and the rule applies (see above); then plan_steps with the split.
StepPlan resume_plan(const Config& cfg, const StepPlan& cfg_plan, const CheckpointMeta& m, int world,
                     const std::string& ckpt_path);

// Pure. The global_batch a checkpoint of this run records: 0 where `plan` is the cfg's batch and
// accum_steps, else world x batch x accum (the next resume keeps it).
int64_t replanned_global_batch(const TrainConfig& t, const StepPlan& plan, int world);

}  // namespace dp::launch
