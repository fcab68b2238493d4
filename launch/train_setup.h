// defines: what a training run derives from its cfg before the first step: the device
// (choose_device) and the checks of the choices that depend on it, the CPU thread count, the
// optimizer and its schedule, the step plan (steps per epoch, total steps, epochs), the
// reducer's options, and the checks that the model fits the data and that every rank built
// the same model.
//
// The decisions are pure functions of the cfg (and of what the process found: its device, the
// data set's size, the world size), so TrainSession only calls them in order.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "base/device.h"
#include "collectives/bootstrap/bootstrap.h"
#include "collectives/reducer/reducer.h"
#include "collectives/reducer/shard_layout.h"
#include "runtime/checkpoint/weights_file.h"
#include "runtime/config.h"
#include "runtime/graph.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/schedule.h"

namespace dp::launch {

// Resolves train.device for this process: cuda::choose_local_device (runtime/cuda/device_choice.h)
// with the GPUs this process sees; its note, if any, becomes one log line.
Device choose_device(cuda::DeviceRequest wanted, int local_rank = 0, int local_size = 1,
                     CollectiveBackend backend = CollectiveBackend::Ring);

// The choices that need a GPU, against the device this process trains on: throws UserError for
// 16-bit precision or NCCL on the CPU, and for a bad profile.trace_steps or profile.steps;
// warns that profile.steps does nothing on the CPU.
void check_device_choices(const Config& cfg, const Device& device);

// train.threads > 0: OpenMP's and OpenBLAS's thread count (0 leaves their defaults).
void set_cpu_threads(int64_t threads);
// One line for the log: the CPU threads and how they wait (kernels/cpu/cpu_env.h), e.g.
// "CPU threads: 2 (OpenMP, shared by oneDNN, OpenBLAS and the own kernels; waits: GOMP_SPINCOUNT=10000)".
std::string cpu_threads_summary();

// train.optimizer and its options -> the optimizer over the parameter arena `params`, weight decay
// left out of the parameters train.decay_params excludes (runtime/optim/param_groups.h). Throws
// UserError for Nesterov without momentum or with dampening (as torch.optim.SGD does).
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& t, const Arena& params);
// train.zero = 1, 2: the same rule over this rank's pieces of the arena (state numel = layout.numel,
// weight decay's skipped spans moved into the shard's coordinates).
std::unique_ptr<optim::Optimizer> make_shard_optimizer(const TrainConfig& t, const Arena& params,
                                                       const ShardLayout& layout);

// train.schedule and its options -> the learning-rate schedule.
optim::ScheduleOptions schedule_of(const TrainConfig& t);

// How many steps a run has, from the training set's size and the world size.
struct StepPlan {
  int64_t batch_size = 0;       // per rank and micro-batch
  int64_t accum = 1;            // micro-batches per step
  int64_t train_samples = 0;    // the training split's size, before sharding
  int64_t steps_per_epoch = 0;  // the epoch's last step may have fewer micro-batches
  int64_t total = 0;            // steps of the run (train.steps, or epochs x steps_per_epoch)
  int64_t epochs = 0;           // epochs it touches
};
// Steps per epoch follow the rank's share of the data (DistributedSampler's num_samples). Throws
// UserError when an epoch has no step, or when the schedule does not fit the run's steps.
StepPlan plan_steps(const Config& cfg, int64_t train_samples, int world);

// The step this plan's straight run has done at a data position: epoch `epoch` (0-based) with the
// first `samples` of its order consumed (all ranks together; clamped to the training set). It is
// the epoch's first step plus its steps minus the steps the rest of the epoch takes at this world
// size (each rank's share of the rest, DistributedSampler's padding or truncation, in micro-batches
// of batch_size, accum per step). A checkpoint of another world size or batch resumes at this step:
// the schedule follows the samples seen, and every epoch, the run with it, ends exactly where a
// straight run of this world size ends. At the checkpoint's own world size and batch it is the
// checkpoint's step.
int64_t step_at_position(const StepPlan& plan, int world, bool drop_last, int64_t epoch, int64_t samples);

// model.init -> the model's starting weights, except the tensors model.init_skip leaves fresh
// (runtime/checkpoint/weights_file.h); throws UserError naming every mismatch and what to change.
WeightsLoad init_model_weights(const ModelConfig& m, Graph& model);

// dist.* -> the gradient reducer's options; gpu: the run's execution context when the gradients
// live on a GPU, else null.
ReducerOptions reducer_options_of(const DistConfig& d, cuda::ExecContext* gpu);

// The loss needs class scores [K] with K at least the data set's classes: throws UserError
// (saying what to change) otherwise. Token windows (block_size > 0: the data's T): scores per
// position [T, K] with K at least the vocabulary (num_classes).
void check_model_fits_data(const Graph& model, int64_t num_classes, int64_t block_size = 0);

// Collective (bootstrap allgather): every rank must have built the same model: names, dtypes
// and shapes, compared with rank 0's. Throws UserError naming the first difference.
void check_same_model(Bootstrap& boot, const Graph& model);

}  // namespace dp::launch
