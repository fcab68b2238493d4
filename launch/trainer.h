// defines: Trainer, the single-process training loop (data -> forward -> loss -> backward ->
// optimizer step), periodic evaluation, progress lines, metrics, checkpoints and resume.
//
// It lives in launch/ rather than runtime/ because it wires together models/ (layers, loss),
// runtime/ (data, optimizers, graph) and collectives/; runtime/ stays below models/.
#pragma once
#include <memory>
#include <string>

#include "launch/evaluate.h"
#include "runtime/config.h"
#include "runtime/graph.h"

namespace dp::launch {

struct TrainResult {
  int64_t steps = 0;               // the global step reached
  int64_t resumed_from_step = -1;  // the checkpoint's step, or -1 when starting fresh
  std::string resumed_from;        // its path
  double seconds = 0;
  EvalResult final_eval;
  std::string run_dir;
  // A stop signal every rank agreed on (SIGUSR1, SIGTERM, SIGINT; 0 = ran to the end): the run
  // checkpointed after `steps` and returned early. requeued: rank 0 requeued the Slurm job.
  int stop_signal = 0;
  bool requeued = false;
};

// Resolves train.device for this process: cuda::choose_local_device (runtime/cuda/device_choice.h)
// with the GPUs this process sees; its note, if any, becomes one log line.
Device choose_device(const std::string& wanted, int local_rank = 0, int local_size = 1,
                     const std::string& backend = "ring");

struct TrainOptions {
  // Start over: ignore and delete the run directory's checkpoints (dptrain --reset). Without
  // it, and with checkpoint.resume = true, training continues from the newest good one.
  bool reset = false;
  // > 0: stop after this step as a preempted job would (write a checkpoint, return, no final
  // evaluation or final.safetensors). For tests of resume.
  int64_t stop_after_steps = 0;
};

// Runs the whole configured training; writes the run directory.
TrainResult train(const Config& cfg, const TrainOptions& options = {});

}  // namespace dp::launch
