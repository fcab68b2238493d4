// defines: train (the entry point: the whole configured training, writing the run directory),
// its TrainOptions and TrainResult, and TrainSession, one run from set-up to finish: its public
// run() reads as the data flow (set up, resume or start over, share rank 0's state, then epochs
// of steps, each step followed by maybe checkpoint, agree on stopping, maybe evaluate; finish),
// each a member function.
//
// It lives in launch/ rather than runtime/ because it wires together models/ (layers, loss),
// runtime/ (data, optimizers, graph, checkpoints) and collectives/; runtime/ stays below models/.
// What the cfg decides before the first step is in launch/train_setup.h; what the run reports
// as it goes (progress, train lines, scalars, trace) in launch/telemetry/telemetry.h.
//
// Every rank runs the same sequence of collectives: the start-up allgather and broadcasts, a
// stop-agreement all-reduce before the first step and after each step but the last, the buffers'
// broadcast after each step (dist.broadcast_buffers), a barrier per checkpoint, the evaluation's
// all-reduces, and the trace allgather at the end.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/bootstrap/bootstrap.h"
#include "collectives/communicator.h"
#include "collectives/reducer/reducer.h"
#include "launch/batch_feed.h"
#include "launch/buffer_broadcast.h"
#include "launch/datasets.h"
#include "launch/evaluate.h"
#include "launch/flight_signal.h"
#include "launch/gpu_run.h"
#include "launch/run_dir.h"
#include "launch/stop_signals.h"
#include "launch/synthetic_input.h"
#include "launch/telemetry/telemetry.h"
#include "launch/train_setup.h"
#include "launch/weight_update.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "launch/checkpoint_saver.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/config.h"
#include "runtime/graph.h"
#include "launch/telemetry/layer_profile.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/schedule.h"

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

class TrainSession {
 public:
  TrainSession(const Config& cfg, const TrainOptions& options);
  ~TrainSession();
  TrainSession(const TrainSession&) = delete;
  TrainSession& operator=(const TrainSession&) = delete;

  // The run, once. Throws UserError for a bad cfg (before the run directory is touched when the
  // cfg alone decides it) and DpError for a failure on the way.
  TrainResult run();
  // After run() failed: what running the same command again does (resume from which checkpoint,
  // or start over), "" when the run failed before its run directory.
  std::string what_a_rerun_does() const;

 private:
  using Clock = std::chrono::steady_clock;
  // An epoch's share of the training data, as its steps take it.
  struct EpochData {
    BatchFeed feed;
    BatchFeed::Item batch;  // the micro-batch in hand
    int64_t samples = 0;    // this rank's samples of the epoch the loader hands out
    int64_t taken = 0;      // of them, taken by the steps so far
  };

  // Set-up, in run()'s order.
  void join_the_job();
  void choose_the_device();
  void open_data_and_build_model();
  void open_run_directory();
  void watch_communication();
  void resume_or_start_over();
  void resume_from(const ResumePoint& r);
  void init_from_weights();
  void checkpoint_renumbered_position();
  void share_rank0_state();
  void make_reducer();
  std::unique_ptr<WeightUpdate> make_weight_update();  // replicated, or train.zero = 1, 2: this rank's pieces
  void announce_training();
  void watch_layers();
  void start_training();

  // The steps.
  bool run_epoch(int64_t epoch);
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  BatchFeed epoch_feed(std::vector<int64_t> order, int64_t epoch);
  void train_step(EpochData& data, int64_t epoch, Clock::time_point t_step);
  StepTally compute_gradients(EpochData& data);
  Clock::time_point next_batch(EpochData& data, int64_t step_taken);
  void loss_and_grad(const Tensor& logits, const BatchFeed::Item& b, double weight, int slot,
                     std::vector<double>& losses, int64_t& top1, int64_t& top5);
  void check_loss(double loss) const;
  const Tensor& dlogits() const { return gpu_ ? dlogits_dev_ : dlogits_; }
  void backward(const StepContext& ctx, bool last_micro_batch, Clock::time_point t_bwd);
  double optimizer_step(double lr);
  StepPosition position(int64_t epoch, double lr) const;

  // After a step.
  void maybe_checkpoint();
  void kill_if_fault_injected();
  StopRequest::Agreement agree_on_stopping();
  void maybe_evaluate(int64_t epoch);
  void maybe_evaluate_after_epoch(int64_t epoch);
  void evaluate_and_log(const std::string& what, int64_t epoch);
  void save_checkpoint();
  void checkpoint_during_training();
  void save_checkpoint_in_background();
  void save_checkpoint_streamed(const std::string& path);
  void save_checkpoint_streamed_in_background();
  void run_streamed_save(const std::string& what, const std::function<void()>& save);
  std::unique_ptr<CheckpointStream> open_replica_stream(const std::vector<CheckpointEntry>& layout,
                                                        const CheckpointMeta& m);
  std::string replica_path() const;
  void save_checkpoint_with(const std::function<void(const CheckpointMeta&, const optim::Optimizer&)>& write);
  void write_replica(const CheckpointMeta& m, const optim::Optimizer& opt);
  void checkpoint_at_the_end();
  void or_abort_all(const std::string& what, const std::function<void()>& f);
  CheckpointMeta checkpoint_meta() const;

  // The ends of a run.
  TrainResult already_complete();
  void stop_as_asked();
  void stop_for(int sig);
  TrainResult finish();
  void finish_telemetry();
  void finish_layer_profile();
  void report_gpu_memory();
  // After the first step (the peak is reached by then): the memory breakdown by category
  // (runtime/memory_account.h) in the log and metrics.jsonl, beside the GPU pool's live and peak.
  void report_memory_breakdown();
  void write_final_weights();

  // A copy: model.num_classes is resolved against the data (0 = the data's count) before the run
  // directory and the checkpoints record it.
  Config cfg_;
  const TrainOptions options_;
  const Clock::time_point t_start_ = Clock::now();
  // Declared in the order they are made, so that they go in reverse: the reducer before the
  // communicator, the model and the optimizer before the GPU run they live on.
  std::unique_ptr<Bootstrap> boot_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<FlightSignal> flight_signal_;  // SIGUSR2: the flight record (before comm_ goes)
  int rank_ = 0, world_ = 1;
  // Rank 0 alone writes and deletes checkpoints and the final weights (every rank writes its
  // own replica); the others wait for a checkpoint at a barrier.
  bool writer_ = true;
  Device device_;
  std::unique_ptr<GpuRun> gpu_;
  Datasets ds_;
  std::vector<std::string> classes_;  // the data's class names (data_classes)
  int workers_ = 1;                   // loader threads (data.workers resolved)
  double step_data_s_ = 0;            // the step's waits for batches so far
  uint64_t seed_ = 0;
  std::unique_ptr<Graph> model_;
  std::unique_ptr<metrics::LayerProfiler> layers_;  // profile.layers (observes model_)
  std::optional<models::SoftmaxCrossEntropy> loss_;
  // The optimizer, train.grad_clip and, under train.zero = 1, 2 on several ranks, this rank's shard
  // (stage 2: the gradient arena keeps this rank's pieces between steps, ZeroShard::release_grads).
  // Outlives reducer_, whose on_reduced it may be.
  std::unique_ptr<WeightUpdate> update_;
  optim::ScheduleOptions sched_;
  StepPlan plan_;
  std::unique_ptr<RunDir> run_;
  // Flushes the rank's log file when the session ends, returning or throwing (warnings are
  // flushed at once).
  struct FlushLogAtExit {
    ~FlushLogAtExit();
  };
  std::optional<FlushLogAtExit> flush_at_exit_;
  TrainResult result_;
  int64_t kill_after_ = -1;  // DPTRAIN_FAULT_KILL_AFTER_STEP
  double slow_step_ms_ = 0;  // DPTRAIN_FAULT_SLOW_STEP_MS
  int64_t oom_at_ = -1;      // DPTRAIN_FAULT_DEVICE_OOM_AT_STEP
  std::unique_ptr<CheckpointDir> ckpts_;
  std::unique_ptr<CheckpointSaver> saver_;  // rank 0 (writer_) only; before gpu_ goes (a pinned snapshot)
  Clock::time_point last_ckpt_time_;        // checkpoint.every_s: when the last checkpoint began (or training)
  // Position: steps done, the last checkpoint's step, where the run resumed (epoch and the
  // samples of its order consumed, all ranks together) and where the data stream is now.
  int64_t step_ = 0, last_saved_ = -1;
  int64_t start_epoch_ = 0, start_samples_ = 0;
  int64_t cur_epoch_ = 0, cur_samples_ = 0;
  bool evaluated_last_ = false;  // the last step was followed by an evaluation
  bool epoch_complete_ = false;  // the last run_epoch used up its epoch's data
  int64_t eval_logged_at_ = -1;  // resumed: the step whose evaluation metrics.jsonl holds already
  int64_t renumbered_from_ = -1;  // resumed at another step number: the checkpoint's own
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<BufferBroadcast> buffer_bcast_;  // dist.broadcast_buffers (several ranks, no SyncBN)
  std::unique_ptr<Telemetry> tel_;
  std::optional<StopRequest> stop_request_;
  // The loss gradient w.r.t. the logits (on the CPU; on the GPU).
  Tensor dlogits_, dlogits_dev_;
  DeviceInputPtr train_input_;  // the GPU's input pipeline (pinned slots, device slots)
  std::unique_ptr<SyntheticInput> synth_input_;  // or synthetic batches made on the GPU
};

}  // namespace dp::launch
