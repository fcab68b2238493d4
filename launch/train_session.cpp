#include "launch/train_session.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "collectives/bootstrap/common.h"
#include "collectives/bootstrap/factory.h"
#include "collectives/collective_tag.h"
#include "collectives/make_communicator.h"
#include "kernels/cpu/elementwise.h"
#include "launch/elastic_batch.h"
#include "launch/fault_kill.h"
#include "launch/memory_vs_plan.h"
#include "launch/size_context.h"
#include "launch/run_history.h"
#include "models/build.h"
#include "runtime/checkpoint/checkpoint_schedule.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/weights_file.h"
#include "runtime/cuda/nvtx.h"
#include "runtime/data/sampler.h"
#include "runtime/device_error.h"
#include "runtime/fault_injection.h"
#include "runtime/log.h"
#include "runtime/memory_account.h"
#include "runtime/optim/param_groups.h"
#include "runtime/suggest.h"
#include "runtime/tunables.h"

namespace dp::launch {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::shared_ptr<spdlog::logger> lg() { return log::get("train"); }

// DPTRAIN_FAULT_DEVICE_OOM_AT_STEP=N: step N's first layer dispatch fails as if its device were
// out of memory (runtime/fault_injection.h), on the CPU too.
int64_t fault_device_oom_at_step() {
  const Tunables t = tunables();
  return t.is_set(Tunable::FaultDeviceOomAtStep) ? t.integer(Tunable::FaultDeviceOomAtStep) : -1;
}

// A streamed save's sink: each piece of the optimizer state to `also`, then appended to each of
// `streams` (null ones left out); null when there is nothing to hand it to (a rank that only takes
// part in the stream).
optim::StateSink state_sink(std::vector<CheckpointStream*> streams, optim::StateSink also) {
  std::erase(streams, nullptr);
  if (streams.empty()) return also;
  return [streams, also = std::move(also)](int k, int64_t begin, const float* data, int64_t len) {
    if (also) also(k, begin, data, len);
    for (CheckpointStream* s : streams) s->append_state(k, begin, data, len);
  };
}

}  // namespace

TrainResult train(const Config& cfg, const TrainOptions& options) {
  TrainSession session(cfg, options);
  try {
    return session.run();
  } catch (DeviceOutOfMemory& e) {  // nothing on its way wrote or deleted a checkpoint: say which one is there
    e.set_resume(session.what_a_rerun_does());
    throw;
  }
}

TrainSession::TrainSession(const Config& cfg, const TrainOptions& options) : cfg_(cfg), options_(options) {}
TrainSession::~TrainSession() = default;
TrainSession::FlushLogAtExit::~FlushLogAtExit() { log::get("train")->flush(); }

// ---------------------------------------------------------------------------------------------
// A training run, top to bottom.

TrainResult TrainSession::run() {
  join_the_job();               // bootstrap, communicator, console log, CPU threads
  choose_the_device();          // and the GPU side
  open_data_and_build_model();  // data, model, loss, optimizer, the step plan
  open_run_directory();         // the cfg is checked: only now touch the file system
  resume_or_start_over();
  share_rank0_state();          // every rank starts from rank 0's parameters and buffers
  make_reducer();
  announce_training();
  if (step_ >= plan_.total) return already_complete();
  // From here on SIGUSR1, SIGTERM and SIGINT stop every rank after the same step. A SIGUSR1 of
  // the start-up (caught since main()) stops the run before its first step.
  stop_request_.emplace();
  if (const int sig = stop_request_->agree(*comm_)) {
    stop_for(sig);
    return result_;
  }
  start_training();
  for (int64_t epoch = start_epoch_; step_ < plan_.total; ++epoch) {
    if (!run_epoch(epoch)) return result_;  // stopped (a signal, or as asked)
    maybe_evaluate_after_epoch(epoch);
  }
  return finish();
}

// One epoch: its steps, each followed by what may come after it. False when the run stops.
bool TrainSession::run_epoch(int64_t epoch) {
  // Mid-epoch resume: the epoch's order is a function of (seed, epoch), so skipping the
  // consumed prefix (counted over all ranks) gives exactly the samples still to see.
  cur_epoch_ = epoch;
  cur_samples_ = epoch == start_epoch_ ? std::min<int64_t>(start_samples_, plan_.train_samples) : 0;
  std::vector<int64_t> order = epoch_order(epoch);
  // Samples the loader will hand out (drop_last keeps only whole batches).
  const int64_t bs = plan_.batch_size, n = static_cast<int64_t>(order.size());
  const int64_t samples = cfg_.data.drop_last ? n / bs * bs : n;
  EpochData data{epoch_feed(std::move(order), epoch), {}, samples, 0};
  while (step_ < plan_.total && data.taken < data.samples) {
    const auto t_step = Clock::now();
    if (gpu_) gpu_->before_step(step_ + 1);
    cuda::NvtxRange nvtx_step("step", gpu_ != nullptr);  // the step and what follows it
    train_step(data, epoch, t_step);
    maybe_checkpoint();
    kill_if_fault_injected();
    if (step_ == options_.stop_after_steps) {
      stop_as_asked();
      return false;
    }
    const StopRequest::Agreement agreed = agree_on_stopping();
    if (agreed.signal) {
      stop_for(agreed.signal);
      return false;
    }
    if (agreed.checkpoint && last_saved_ != step_) checkpoint_during_training();  // checkpoint.every_s
    maybe_evaluate(epoch);
  }
  epoch_complete_ = data.taken >= data.samples;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Set-up.

void TrainSession::join_the_job() {
  // Who this process is: the bootstrap sets the identity every log line and error carries.
  boot_ = make_bootstrap(cfg_.dist.bootstrap, cfg_.dist.timeout_s, cfg_.dist.iface);
  comm_ = make_communicator(cfg_.dist.backend, *boot_, cfg_.dist.timeout_s, cfg_.dist.iface);
  rank_ = boot_->rank(), world_ = boot_->size();
  writer_ = rank_ == 0;
  log::configure(cfg_.run.log_level, "", false, cfg_.run.log_levels);  // the console is rank 0's
  if (world_ > 1)
    lg()->info("{} ranks via the {} bootstrap, {} collectives", world_, boot_->kind(), comm_->backend());
  set_cpu_threads(cfg_.train.threads);
  workers_ = loader_workers(cfg_.data, boot_->local_size());
}

void TrainSession::choose_the_device() {
  device_ = choose_device(cfg_.train.device, boot_->local_rank(), boot_->local_size(), cfg_.dist.backend);
  check_device_choices(cfg_, device_);
  if (!device_.is_cuda()) return;
  // The GPU side: streams, handles, workspace, precision, loss scaling, profiler window.
  gpu_ = std::make_unique<GpuRun>(cfg_.train, device_.index);
  gpu_->profile_window(cfg_.profile.steps);
  lg()->info("training on {} in {}{}, cuDNN/cuBLASLt workspace up to {} MiB", device_.str(), enum_name(cfg_.train.precision),
             gpu_->channels_last() ? " (activations channels last)" : "", cfg_.train.workspace_mb);
}

void TrainSession::open_data_and_build_model() {
  with_size_context("opening the data", data_size_keys(cfg_.data), [&] {
    ds_ = open_datasets(cfg_.data, tar_index_dir(cfg_), token_windows_of(cfg_.model));
  });
  lg()->info("data: train {} ({} samples), eval {} samples", ds_.train.dataset->describe(), ds_.train.indices.size(),
             ds_.eval.indices.size());
  if (ds_.tokens())
    lg()->info("token windows of model.block_size + 1 = {} tokens: the loss and the accuracy are over every position "
               "(token accuracy)",
               cfg_.model.block_size + 1);
  classes_ = data_classes(ds_);  // none for token windows: their classes are the vocabulary
  if (!ds_.tokens())
    cfg_.model.num_classes = resolve_num_classes(cfg_.model.num_classes, static_cast<int64_t>(classes_.size()));
  seed_ = static_cast<uint64_t>(cfg_.run.seed);
  // ZeRO stage 2 on CPU ranks: the gradient arena on a page mapping whose pages the rank gives back
  // (a GPU is refused below, make_weight_update).
  const ArenaMemory grad_memory =
      cfg_.train.zero == 2 && world_ > 1 && device_.is_cpu() ? ArenaMemory::Paged : ArenaMemory::Allocated;
  with_size_context("building the model", model_size_keys(cfg_.model), [&] {
    model_ = models::build_model(cfg_.model, ds_.train.dataset->sample_shape(), seed_, device_,
                                 gpu_ ? gpu_->compute() : DType::F32, gpu_ ? gpu_->exec() : nullptr, grad_memory);
  });
  model_->set_cpu_backend(cfg_.train.cpu_backend);
  model_->set_cpu_conv_algorithm(cfg_.train.cpu_conv_algorithm);
  model_->set_cpu_gemm(cfg_.train.cpu_gemm);
  model_->set_cpu_matmul_bf16(device_.is_cpu() && cfg_.train.precision == Precision::Bf16);  // checked above
  const std::string gpu_choices = models::apply_gpu_choices(*model_, cfg_.train);
  if (device_.is_cpu()) {  // train.cpu_backend and the threads, once
    lg()->info("{}", model_->cpu_plan_summary());
    lg()->info("{}", cpu_threads_summary());
  } else {  // train.cudnn_api, train.bn_impl, train.gpu_fusion and train.gpu_step_arena
    lg()->info("{}", gpu_choices);
    lg()->info("{}", model_->gpu_plan_summary());
  }
  lg()->info("model {}: {} parameters\n{}",
             cfg_.model.preset == PresetKind::None ? "from [[layer]] list" : enum_name(cfg_.model.preset),
             model_->num_parameters(), model_->summary());
  if (ds_.tokens()) check_model_fits_data(*model_, cfg_.model.vocab_size, cfg_.model.block_size);
  else check_model_fits_data(*model_, static_cast<int64_t>(classes_.size()));
  loss_.emplace(cfg_.train.label_smoothing);
  update_ = make_weight_update();
  if (cfg_.train.weight_decay != 0)
    lg()->info("{}", optim::decay_summary(model_->params(), cfg_.train.decay_params, cfg_.train.weight_decay));
  update_->optimizer().place(device_, gpu_ ? gpu_->compute_stream() : nullptr);
  // Mixed precision: the optimizer's pass also writes the layers' 16-bit weights (one read of
  // each parameter per step instead of the update's and refresh_compute_params' cast).
  // (ZeRO: the pieces' update writes none; the gathered masters are cast after the gather.)
  if (gpu_ && !update_->shard()) update_->optimizer().write_compute_copy(model_->compute_params());
  if (cfg_.train.grad_clip > 0) {
    lg()->info("gradients clipped to a global L2 norm of {} after the all-reduce (train.grad_clip)",
               cfg_.train.grad_clip);
  }
  sched_ = schedule_of(cfg_.train);
  plan_ = plan_steps(cfg_, static_cast<int64_t>(ds_.train.indices.size()), world_);
}

void TrainSession::open_run_directory() {
  run_ = std::make_unique<RunDir>(cfg_.run.dir, cfg_.run.name);
  if (rank_ == 0) run_->write_text("config.toml", to_toml(cfg_));
  if (rank_ == 0) run_->write_text("classes.json", classes_json(classes_) + "\n");
  log::configure(cfg_.run.log_level, run_->file(fmt::format("logs/rank-{}.log", rank_)), false, cfg_.run.log_levels);
  log_tunables();  // the DPTRAIN_* variables set, once: rank 0's console and every rank's file
  watch_communication();
  // Warnings reach the file at once (a killed run keeps them); the rest when the session ends
  // (the loggers share their sinks, so flushing one flushes the file).
  for (const char* sub : {"train", "ckpt"}) log::get(sub)->flush_on(spdlog::level::warn);
  flush_at_exit_.emplace();
  lg()->info("run directory {}", run_->path());
  result_.run_dir = run_->path();
  // Fault injection for resume tests: DPTRAIN_FAULT_KILL_AFTER_STEP=N makes the process SIGKILL
  // itself right after step N (and any checkpoint due at N), as `kill -9` would.
  kill_after_ = fault_kill_step(tunables(), rank_);
  oom_at_ = fault_device_oom_at_step();
  slow_step_ms_ = tunables().number(Tunable::FaultSlowStepMs);
}

// The flight recorder's file (written on a communication failure, abort, or SIGUSR2) and how
// this rank reaches its peers, in its own log (collectives/flight_recorder.h).
void TrainSession::watch_communication() {
  if (world_ == 1 || comm_->flight_recorder() == nullptr) return;
  comm_->flight_recorder()->set_path(run_->file(fmt::format("flight/rank-{}.json", rank_)));
  flight_signal_ = std::make_unique<FlightSignal>(*comm_);
  const std::vector<int> shm = comm_->shared_memory_peers();
  const std::vector<std::string> hosts = comm_->rank_hosts();
  lg()->info("links: host {}; shared memory with {}; TCP with the other {} rank(s)",
             static_cast<size_t>(rank_) < hosts.size() ? hosts[rank_] : "?",
             shm.empty() ? "no rank" : format_ranks(shm), world_ - 1 - static_cast<int>(shm.size()));
}

// load_checkpoint changes nothing unless the whole file checks out, so a bad newest checkpoint
// leaves the fresh model for the next candidate.
void TrainSession::resume_or_start_over() {
  ckpts_ = std::make_unique<CheckpointDir>(run_->file("checkpoints"));
  if (writer_) ckpts_->prepare();
  if (options_.reset || !cfg_.checkpoint.resume) {
    const char* why = options_.reset ? "--reset" : "checkpoint.resume = false";
    const int n = writer_ ? ckpts_->remove_all() : 0;
    if (n > 0) lg()->warn("{}: starting over; deleted {} checkpoint(s) of an earlier run in {}", why, n, ckpts_->path());
    if (writer_) {
      const SetAside s = set_aside_earlier_run(*run_, std::time(nullptr));
      if (!s.folder.empty())
        lg()->warn("{}: moved the earlier run's {} to {}; this run starts clean files", why, join(s.moved), s.folder);
    }
  } else if (auto r = update_->resume(*ckpts_)) {
    resume_from(*r);
  }
  if (result_.resumed_from_step < 0 && !cfg_.model.init.empty()) init_from_weights();
  cur_epoch_ = start_epoch_, cur_samples_ = start_samples_;
  if (writer_) saver_ = std::make_unique<CheckpointSaver>(*ckpts_, cfg_.checkpoint.keep, last_saved_, tunables());
  if (renumbered_from_ >= 0) checkpoint_renumbered_position();
}

// Resumed at another step number than its checkpoint's (another world size or batch): the
// earlier run's checkpoints numbered above this run's step move into a subfolder (they would
// shadow this run's newer ones) and the position is checkpointed under its new number at once.
// Collective: a barrier first (every rank has loaded the checkpoint before rank 0 moves it), then
// save_checkpoint's.
void TrainSession::checkpoint_renumbered_position() {
  comm_->barrier();
  if (writer_) {
    const std::string sub = fmt::format("renumbered-at-step-{}", step_);
    const std::vector<std::string> moved = ckpts_->move_above(step_, sub);
    if (!moved.empty())
      lg()->warn("moved the earlier run's checkpoint(s) {} into {}/{}: their step numbers are above this run's {}",
                 join(moved), ckpts_->path(), sub, step_);
    // metrics.jsonl's step numbers change meaning here: one line says so.
    run_->append_metrics({{"split", "renumbered"}, {"step", step_}, {"checkpoint_step", renumbered_from_},
                          {"world_size", world_}, {"batch_size", plan_.batch_size}, {"accum_steps", plan_.accum}});
  }
  save_checkpoint();
}

// model.init: a fresh run starts from these weights (every rank reads them; rank 0's are then
// broadcast like any start), except the tensors model.init_skip leaves fresh. The optimizer starts
// fresh. A resumed run continues from its own checkpoints and never comes here.
void TrainSession::init_from_weights() {
  const WeightsLoad w = init_model_weights(cfg_.model, *model_);
  lg()->info("model.init: {} of the model's {} tensors from {} ({}{})", w.plan.load.size(), model_->state().size(),
             w.path, weights_kind_name(w.kind), w.translated.empty() ? "" : ", read as " + w.translated);
  if (!w.plan.skipped.empty())
    lg()->info("model.init_skip: left at their fresh initialisation: {}", join(w.plan.skipped));
  if (!w.plan.unused.empty()) lg()->info("model.init_skip: not used from the file: {}", join(w.plan.unused));
}

// Takes the checkpoint's position, warning where this run's data or batch differ from its.
void TrainSession::resume_from(const ResumePoint& r) {
  const CheckpointMeta& m = r.meta;
  plan_ = resume_plan(cfg_, plan_, m, world_, r.path);  // train.elastic_batch (launch/elastic_batch.h)
  const int64_t n_train = plan_.train_samples, bs = plan_.batch_size, world_size = world_;
  if (!r.skipped.empty())
    lg()->warn("resuming from the previous good checkpoint {} (step {}) because {} newer one(s) failed their checks "
               "(see above)",
               r.path, m.step, r.skipped.size());
  // Where a straight run of this world size and batch is after the checkpoint's samples.
  const int64_t at = step_at_position(plan_, world_, cfg_.data.drop_last, m.epoch, std::min(m.epoch_samples, n_train));
  if (at > plan_.total)
    DP_THROW_USER("checkpoint '{}' is at step {} of this run, beyond its {}: raise train.steps or train.epochs, "
                  "or start over with --reset",
                  r.path, at, counted(plan_.total, "step"));
  if (m.dataset_size != n_train || m.shuffle != cfg_.data.shuffle || m.drop_last != cfg_.data.drop_last)
    lg()->warn("checkpoint '{}' was written with {} training samples (shuffle {}, drop_last {}), this run has {} "
               "(shuffle {}, drop_last {}): the rest of the epoch is not the data the interrupted run would have seen",
               r.path, m.dataset_size, m.shuffle, m.drop_last, n_train, cfg_.data.shuffle, cfg_.data.drop_last);
  if (at != m.step)
    lg()->warn("checkpoint '{}' was written at step {} with batch {} x {} rank(s); this run uses {} x {}{}: it goes on "
               "at step {} of its {}, where a straight run of its own sees the same samples (epoch {}, sample {}), so "
               "its schedule and its end follow the samples seen",
               r.path, m.step, m.batch_size, m.world_size, bs, world_size,
               plan_.accum > 1 ? fmt::format(" x {} micro-batches", plan_.accum) : "", at, plan_.total, m.epoch + 1,
               m.epoch_samples);
  step_ = at;
  last_saved_ = at == m.step ? at : -1;
  renumbered_from_ = at == m.step ? -1 : m.step;
  start_epoch_ = m.epoch;
  // epoch_samples counts every rank's samples: the consumed prefix of the epoch's order.
  start_samples_ = m.epoch_samples;
  result_.resumed_from_step = step_;
  result_.resumed_from = r.path;
  if (writer_) {
    // The steps after the checkpoint are redone: their metrics lines go; an evaluation of the
    // checkpoint's step that was logged already is not logged again.
    const MetricsTrim t = trim_metrics_file(*run_, m.step);
    if (t.dropped > 0)
      lg()->info("metrics.jsonl: dropped {} line(s) of the steps after {} (this run redoes them)", t.dropped, m.step);
    if (t.eval_at_step) eval_logged_at_ = step_;
  }
  lg()->info("resumed from {}: step {}, epoch {}, {} samples of it done", r.path, step_, start_epoch_ + 1,
             start_samples_);
}

// Collective: rank 0's parameters and buffers (fresh or resumed) become everyone's.
void TrainSession::share_rank0_state() {
  if (world_ > 1) {
    check_same_model(*boot_, *model_);
    if (gpu_) gpu_->synchronize();  // collectives read device tensors that are complete
    comm_->broadcast(model_->params().flat(), 0);
    for (const auto& b : model_->buffers()) {
      // A broadcast moves bytes: an i64 buffer (num_batches_tracked) travels as a same-size f64 view.
      const Tensor& t = b.tensor;
      comm_->broadcast(t.dtype() == DType::I64 ? Tensor::view_of(t.storage(), t.byte_offset(), t.shape(), DType::F64) : t,
                       0);
    }
  }
  model_->refresh_compute_params();  // the 16-bit weights follow the (resumed, broadcast) masters
}

void TrainSession::make_reducer() {
  if (world_ == 1) return;
  ReducerOptions ro = reducer_options_of(cfg_.dist, gpu_ ? gpu_->exec() : nullptr);
  update_->configure_reducer(ro);  // ZeRO: reduce-scatter (stage 2: and give back foreign gradient pages)
  reducer_ = std::make_unique<Reducer>(*comm_, *model_, ro);
  const ZeroShard* zero = update_->shard();
  DP_CHECK(!zero || reducer_->buckets().size() == zero->layout().pieces.size(),
           "ZeRO: the reducer cut {} buckets, the shard layout {}", reducer_->buckets().size(),
           zero->layout().pieces.size());
  if (zero)
    lg()->info("ZeRO stage {} (train.zero = {}): this rank keeps the optimizer state{} of {} of the {} parameters ({} "
               "pieces, one per bucket)",
               zero->stage(), zero->stage(),
               zero->stage() == 2 ? " and, between steps, the gradients" : "", zero->layout().numel,
               model_->params().numel(), zero->layout().pieces.size());
  lg()->info("gradient all-reduce: {} buckets ({} MB first, then {} MB), overlap {}, wire {}", reducer_->buckets().size(),
             cfg_.dist.first_bucket_mb, cfg_.dist.bucket_mb, cfg_.dist.overlap, dtype_name(ro.wire));
  if (!cfg_.dist.broadcast_buffers || cfg_.model.sync_bn) return;  // asked not to, or global statistics already
  buffer_bcast_ = std::make_unique<BufferBroadcast>(*model_);
  if (buffer_bcast_->empty()) return buffer_bcast_.reset();
  lg()->info("buffers: rank 0's {} buffers ({:.1f} KB) replace the other ranks' after every step (dist.broadcast_buffers)",
             buffer_bcast_->count(), buffer_bcast_->bytes() / 1e3);
}

// What the run will do, and where it reports as it goes.
void TrainSession::announce_training() {
  lg()->info("training: {} ({} of {}, batch {}{}), optimizer {}, lr {} ({})", counted(plan_.total, "step"),
             counted(plan_.epochs, "epoch"), counted(plan_.steps_per_epoch, "step"), plan_.batch_size,
             plan_.accum > 1 ? fmt::format(" x {} micro-batches", plan_.accum) : "", enum_name(cfg_.train.optimizer),
             cfg_.train.lr, enum_name(cfg_.train.schedule));
  tel_ = std::make_unique<Telemetry>(cfg_, rank_, world_, rank_ == 0 ? run_->path() : "", t_start_);
  if (ds_.tokens()) tel_->count_tokens(cfg_.model.block_size);
  tel_->watch_stragglers(*comm_, cfg_.dist.straggler_ms);
  watch_layers();
}

// profile.layers: the per-layer profile's recorder (a no-op outside its window) as the graph's
// observer. Its marks: CUDA events on the compute stream on a GPU, the clock on the CPU.
void TrainSession::watch_layers() {
  const metrics::StepRange w = metrics::parse_step_range(cfg_.profile.layers, "profile.layers");
  std::unique_ptr<metrics::MarkSource> marks;
  if (!w.empty()) marks = gpu_ ? metrics::cuda_event_marks(gpu_->compute_stream()) : metrics::clock_marks();
  layers_ = std::make_unique<metrics::LayerProfiler>(w, std::move(marks),
                                                     metrics::step_mark_bound(model_->nodes().size(), plan_.accum));
  if (!w.empty()) model_->set_observer(layers_.get());
}

// The GPU's input pipeline, or its synthetic batches (made once for the run), and the first log
// window.
void TrainSession::start_training() {
  if (gpu_ && cfg_.data.dataset == data::DatasetKind::Synthetic &&
      cfg_.data.synthetic_device == data::SyntheticDevice::Cuda) {
    const SyntheticSpec spec = synthetic_spec(cfg_.data, token_windows_of(cfg_.model));  // images or token windows
    synth_input_ = std::make_unique<SyntheticInput>(*gpu_->exec(), spec, transform_of(cfg_.data, true),
                                                    plan_.batch_size, gpu_->compute(), gpu_->channels_last());
    lg()->info("data: training batches made on {} (data.synthetic_device = \"cuda\"): no loader, no copy",
               device_.str());
  } else if (gpu_) {
    train_input_ = make_device_input(*gpu_, transform_of(cfg_.data, true), *ds_.train.dataset, plan_.batch_size, seed_);
  }
  tel_->restart_window();
  last_ckpt_time_ = Clock::now();  // checkpoint.every_s counts from here
}

// ---------------------------------------------------------------------------------------------
// A step.

// The epoch's samples for this rank, after the prefix a resumed run has consumed (indices into
// the training set).
std::vector<int64_t> TrainSession::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order = data::sampler_indices_after(
      plan_.train_samples, world_, rank_, cfg_.data.shuffle, seed_, epoch, cfg_.data.drop_last, cur_samples_,
      cfg_.data.permutation);
  for (auto& i : order) i = ds_.train.indices[i];
  return order;
}

// The epoch's batches of `order`: the loader's (through the GPU's input pipeline on a GPU), or
// SyntheticInput's.
BatchFeed TrainSession::epoch_feed(std::vector<int64_t> order, int64_t epoch) {
  if (synth_input_) return BatchFeed(std::move(order), plan_.batch_size, cfg_.data.drop_last, synth_input_.get());
  return BatchFeed(*ds_.train.dataset, std::move(order), plan_.batch_size, cfg_.data.drop_last,
                   transform_of(cfg_.data, true), seed_, static_cast<uint64_t>(epoch), train_input_.get(), workers_);
}

// Gradients, the optimizer, and what the step adds to the log window. t_step: when it began.
void TrainSession::train_step(EpochData& data, int64_t epoch, Clock::time_point t_step) {
  layers_->begin_step(step_ + 1);
  tel_->begin_step(step_ + 1);
  set_collective_step(step_ + 1);  // the step every collective of this one is recorded with
  if (slow_step_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(slow_step_ms_));
  if (step_ + 1 == oom_at_) arm_device_oom_fault(fmt::format("DPTRAIN_FAULT_DEVICE_OOM_AT_STEP={}", oom_at_));
  const double lr = optim::lr_at(sched_, step_, plan_.total);
  const bool report_memory = step_ + 1 == std::max<int64_t>(result_.resumed_from_step, 0) + 1;
  // ZeRO stage 2 measures its gradient arena at each bucket's release (mincore over the whole
  // arena) for the step whose memory account is logged only.
  update_->measure_memory(report_memory);
  StepTally tally = compute_gradients(data);
  tally.grad_norm = optimizer_step(lr);
  if (buffer_bcast_) {
    const auto t0 = Clock::now();
    buffer_bcast_->run(*comm_, gpu_.get());  // one model on every rank at every step boundary
    tel_->phase("broadcast_buffers", t0, Clock::now());
  }
  const bool layer_window_done = layers_->end_step();
  tel_->end_step();
  ++step_;
  if (gpu_) gpu_->after_step(step_);
  evaluated_last_ = false;
  cur_samples_ += tally.samples * world_;
  tally.step_s = seconds_since(t_step);
  tel_->step_done(tally, position(epoch, lr), *run_);
  if (layer_window_done) finish_layer_profile();  // after the step's own time: the GPU's one wait
  if (report_memory) {
    data.feed.wait_ahead_allocated();  // the input pipeline at its steady state: all its batches made
    report_memory_breakdown();
  }
}

// zero_grad, then the step's micro-batches (accum_steps; the epoch's last step may have fewer):
// forward, loss and backward each, the last one's backward reducing the gradients over the ranks.
// Each micro-batch's loss gradient is weighted by its share of the step's samples, so the
// accumulated gradient is that of the mean over all of them. The losses and hits are read after
// the last backward (on a GPU: the step's one host wait, so the host enqueues backward while the
// GPU runs forward), and a loss that is not finite stops the run before the optimizer step.
StepTally TrainSession::compute_gradients(EpochData& data) {
  const uint64_t step = static_cast<uint64_t>(step_);
  const StepContext ctx = gpu_ ? gpu_->context(true, seed_, step, comm_.get()) : StepContext{true, seed_, step, comm_.get()};
  update_->zero_grads();  // ZeRO stage 2: only where the rank keeps gradient memory
  step_data_s_ = 0;
  const int64_t step_samples = std::min(plan_.accum * plan_.batch_size, data.samples - data.taken);
  int64_t n = 0, top1 = 0, top5 = 0;
  std::vector<double> losses;  // per micro-batch: the CPU's at once, the GPU's after backward
  std::vector<int64_t> sizes;
  while (n < step_samples) {
    const auto t_fwd = next_batch(data, n);
    const BatchFeed::Item& b = data.batch;
    {
      cuda::NvtxRange r("forward", gpu_ != nullptr);
      const Tensor& logits = model_->forward(ctx, b.x);
      layers_->begin(metrics::Phase::Loss);
      const double weight = static_cast<double>(b.n) / static_cast<double>(step_samples);
      loss_and_grad(logits, b, weight, static_cast<int>(sizes.size()), losses, top1, top5);
      layers_->end();
    }
    sizes.push_back(b.n);
    n += b.n;
    const auto t_bwd = Clock::now();
    tel_->phase("forward", t_fwd, t_bwd);
    backward(ctx, n == step_samples, t_bwd);
  }
  if (gpu_) losses = gpu_->read_step(top1, top5);
  data.taken += n;
  double l = 0;
  for (size_t k = 0; k < losses.size(); ++k) {
    check_loss(losses[k]);
    l += losses[k] * static_cast<double>(sizes[k]);
  }
  StepTally tally;
  tally.loss = l / static_cast<double>(n);
  tally.samples = n, tally.top1 = top1;
  tally.positions = ds_.tokens() ? n * cfg_.model.block_size : n;  // what the hits are counted over
  if (reducer_) tally.comm_s = reducer_->last_step().comm_s, tally.exposed_s = reducer_->last_step().exposed_s;
  tally.data_s = step_data_s_;
  return tally;
}

// A micro-batch's loss that is not finite ends the run (this rank's error; the others stop at
// their next collective, and no rank has saved this step: a save begins with every rank's barrier).
// Under fp16 loss scaling an inf/NaN loss is an overflow like any other: its gradients are
// inf/NaN too, so the step is skipped and the scale lowered (GradScaler's behaviour).
void TrainSession::check_loss(double loss) const {
  if (std::isfinite(loss) || (gpu_ && gpu_->scaling())) return;
  throw DpError(fmt::format("the loss became {} in step {} [{}]; lower train.lr or check the data",
                            std::isnan(loss) ? "NaN" : (loss > 0 ? "inf" : "-inf"), step_ + 1, identity_string()));
}

// The step's next micro-batch into data.batch (step_taken: the samples the step has so far);
// returns when the wait for it ended.
Clock::time_point TrainSession::next_batch(EpochData& data, int64_t step_taken) {
  const auto t_data = Clock::now();
  bool got = false;
  {
    cuda::NvtxRange r("data", gpu_ != nullptr);
    layers_->begin(metrics::Phase::DataWait);
    got = data.feed.next(data.batch);
    layers_->end();
  }
  if (!got)
    throw DpError(fmt::format("the data loader ended after {} of {} samples at step {} [{}]", data.taken + step_taken,
                              data.samples, step_, identity_string()));
  const auto t_got = Clock::now();
  tel_->phase("data", t_data, t_got);
  step_data_s_ += std::chrono::duration<double>(t_got - t_data).count();
  return t_got;
}

// One micro-batch's loss, its gradient w.r.t. the logits weighted by `weight` (its share of the
// step; on fp16 also times the loss scale) into dlogits() on the model's device, and its hits. On
// the CPU the loss goes onto `losses` and the hits are counted now; on a GPU both are enqueued
// there as micro-batch `slot` of the step (GpuRun::read_step reads them). A language model's
// logits (N, T, V) and targets (N, T) count as N T rows: the mean over every position.
void TrainSession::loss_and_grad(const Tensor& logits, const BatchFeed::Item& b, double weight, int slot,
                                 std::vector<double>& losses, int64_t& top1, int64_t& top5) {
  const Tensor z = score_rows(logits), y = label_rows(b.y);
  const int64_t classes = models::output_width(*model_);  // V; a padded LM head's rows are longer
  Tensor& dz = gpu_ ? dlogits_dev_ : dlogits_;  // (logits' shape); its row view gets the gradient
  if (!gpu_) dz = model_->loss_gradient();  // on the CPU the step plan's place for it (a view of the arena)
  if (gpu_) ensure_capacity(dz, logits.shape(), DType::F32, logits.device());  // its own: a smaller batch in its bytes
  else ensure_tensor(dz, logits.shape(), DType::F32, logits.device());
  Tensor dz_rows = dz.reshape(z.shape());
  if (gpu_) {
    gpu_->enqueue_micro_batch(*loss_, z, y, dz_rows, weight, classes, slot);
    return;
  }
  losses.push_back(loss_->forward_backward(z, y, &dz_rows, classes));
  if (weight != 1.0) kernels::cpu::scale(dz.data<float>(), dz.data<float>(), static_cast<float>(weight), dz.numel());
  count_hits(z, y, top1, top5, classes);
}

// The step's weight update (launch/weight_update.h). train.zero = 1, 2 on several ranks: the
// optimizer holds the state of this rank's pieces of the arena only (collectives/reducer/zero_shard.h),
// cut from the buckets the Reducer will make.
std::unique_ptr<WeightUpdate> TrainSession::make_weight_update() {
  const double max_norm = cfg_.train.grad_clip;
  if (!(cfg_.train.zero > 0 && world_ > 1))
    return replicated_update(*model_, make_optimizer(cfg_.train, model_->params()), max_norm,
                             gpu_ ? gpu_->compute_stream() : nullptr);
  if (!device_.is_cpu())
    DP_THROW_USER("train.zero = {} runs on CPU ranks only so far, and this rank trains on {} (train.device = \"{}\"): "
                  "set train.device = \"cpu\" or train.zero = 0",
                  cfg_.train.zero, device_.str(), enum_name(cfg_.train.device));
  auto zero = std::make_unique<ZeroShard>(*comm_, reducer_buckets(*model_, reducer_options_of(cfg_.dist, nullptr)),
                                          model_->params().numel(), static_cast<int>(cfg_.train.zero));
  std::unique_ptr<optim::Optimizer> opt = make_shard_optimizer(cfg_.train, model_->params(), zero->layout());
  return sharded_update(*model_, std::move(zero), std::move(opt), max_norm, gpu_ ? gpu_->compute_stream() : nullptr);
}

// Backward from dlogits(); the step's last micro-batch also reduces the gradients (the reducer
// starts each bucket's all-reduce as backward completes it). t_bwd: when backward began.
void TrainSession::backward(const StepContext& ctx, bool last_micro_batch, Clock::time_point t_bwd) {
  cuda::NvtxRange nvtx_bwd("backward", gpu_ != nullptr);
  if (reducer_ && last_micro_batch) {
    reducer_->prepare();
    model_->backward(ctx, dlogits(), [&](int node) { reducer_->on_ready(node); });
    const auto t_wait = Clock::now();
    tel_->phase("backward", t_bwd, t_wait);
    layers_->begin(metrics::Phase::CommWait);
    reducer_->finalize();  // gradients are now the average over all ranks
    layers_->end();
    tel_->comm(reducer_->last_step());
  } else {
    model_->backward(ctx, dlogits());
    tel_->phase("backward", t_bwd, Clock::now());
  }
}

// fp16: unscale the reduced gradients (an inf/NaN skips the step and lowers the scale); then
// train.grad_clip, then the update. Returns the gradient norm before clipping (NaN without
// clipping or for a skipped step).
double TrainSession::optimizer_step(double lr) {
  const auto t_opt = Clock::now();
  double norm = std::nan("");
  {
    cuda::NvtxRange r("optimizer", gpu_ != nullptr);
    layers_->begin(metrics::Phase::Optimizer);
    // fp16: unscale the reduced gradients; an inf/NaN skips the step and lowers the scale.
    const bool stepped = !gpu_ || gpu_->unscale_and_update(*model_);
    if (stepped) norm = update_->step(lr);
    // The 16-bit weights follow the masters: written by the optimizer's own pass, else cast here.
    if (!stepped || !update_->optimizer().writes_compute_copy()) model_->refresh_compute_params();
    layers_->end();
  }
  tel_->phase("optimizer", t_opt, Clock::now());
  return norm;
}

StepPosition TrainSession::position(int64_t epoch, double lr) const {
  StepPosition at;
  at.epoch = epoch, at.epochs = plan_.epochs, at.step = step_, at.total = plan_.total, at.lr = lr;
  if (gpu_) at.scaling = gpu_->scaling(), at.loss_scale = gpu_->loss_scale(), at.skipped_steps = gpu_->skipped_steps();
  return at;
}

// ---------------------------------------------------------------------------------------------
// After a step.

void TrainSession::maybe_checkpoint() {
  if (saver_) saver_->collect();  // a background write that finished: its line (or its error)
  if (!checkpoint_due_by_steps(step_, cfg_.checkpoint.every_steps)) return;
  // The last step's checkpoint is the run's end's (checkpoint_at_the_end): written now, so a
  // finished run never ends with its last checkpoint in doubt.
  if (step_ == plan_.total) save_checkpoint();
  else checkpoint_during_training();
}

void TrainSession::kill_if_fault_injected() {
  if (step_ != kill_after_) return;
  lg()->warn("DPTRAIN_FAULT_KILL_AFTER_STEP={}: killing this process (SIGKILL)", kill_after_);
  log::get("train")->flush();
  std::raise(SIGKILL);
}

// Collective: a stop signal (SIGUSR1: checkpoint and requeue; SIGTERM/SIGINT: checkpoint and
// exit) ends the run after the step every rank agrees on; after the last step the run just
// finishes (no all-reduce). Rank 0's clock decides checkpoint.every_s on the same all-reduce.
StopRequest::Agreement TrainSession::agree_on_stopping() {
  if (step_ >= plan_.total) return {};
  const bool due = rank_ == 0 && checkpoint_due_by_time(cfg_.checkpoint.every_s, seconds_since(last_ckpt_time_));
  return stop_request_->agree_after_step(*comm_, due);
}

void TrainSession::maybe_evaluate(int64_t epoch) {
  if (cfg_.train.eval_every > 0 && step_ % cfg_.train.eval_every == 0) {
    evaluate_and_log(fmt::format("at step {}", step_), epoch);
    evaluated_last_ = true;
  }
}

// Without train.eval_every, every epoch ends with an evaluation; with it, the run does unless
// its last step had one. A run that ends inside an epoch (train.steps) says where.
void TrainSession::maybe_evaluate_after_epoch(int64_t epoch) {
  if (cfg_.train.eval_every != 0 && (step_ != plan_.total || evaluated_last_)) return;
  if (epoch_complete_) return evaluate_and_log(fmt::format("after epoch {} (step {})", epoch + 1, step_), epoch);
  const int64_t into = step_ - epoch * plan_.steps_per_epoch;
  evaluate_and_log(fmt::format("at step {} ({} of {} into epoch {})", step_, into,
                               counted(plan_.steps_per_epoch, "step"), epoch + 1),
                   epoch);
}

// Collective (the evaluation's all-reduces); its log line, scalars and rank 0's metrics line.
void TrainSession::evaluate_and_log(const std::string& what, int64_t epoch) {
  result_.final_eval = evaluate(*model_, *loss_, ds_.eval, cfg_, step_, *comm_, gpu_.get(), workers_);
  const EvalResult& e = result_.final_eval;
  tel_->end_progress_line();
  if (e.tokens)
    lg()->info("eval {}: loss {:.4f} ppl {:.3f} token top1 {:.4f} top5 {:.4f} ({} windows, {} tokens)", what, e.loss,
               e.ppl(), e.top1, e.top5, e.samples, e.positions);
  else
    lg()->info("eval {}: loss {:.4f} top1 {:.4f} top5 {:.4f} ({} samples)", what, e.loss, e.top1, e.top5, e.samples);
  if (step_ == eval_logged_at_) return;  // resumed at a step whose evaluation the files hold already
  tel_->scalars(step_, {{"eval/loss", e.loss}, {"eval/accuracy", e.top1}, {"eval/top5", e.top5}});
  if (e.tokens) tel_->scalars(step_, {{"eval/ppl", e.ppl()}});
  if (rank_ != 0) return;
  nlohmann::json line = {{"split", "eval"}, {"step", step_},      {"epoch", epoch + 1},      {"loss", e.loss},
                         {"top1", e.top1},  {"top5", e.top5},     {"samples", e.samples},    {"time", seconds_since(t_start_)}};
  if (e.tokens) line.update({{"ppl", e.ppl()}, {"tokens", e.positions}, {"accuracy_over", "tokens"}});
  run_->append_metrics(line);
}

// Runs f; when it fails, every rank hears why through the communicator's abort (the others are
// waiting in a collective: without it they could only say that this rank left) and this rank
// fails with the same words.
void TrainSession::or_abort_all(const std::string& what, const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    const std::string why = fmt::format("{}: {}", what, e.what());
    comm_->abort(why);
    throw DpError(why);
  }
}

// Collective (barriers): once every rank has finished the step, rank 0 writes the checkpoint (after
// a background write in flight) and every rank waits for it; with checkpoint.replicas every rank
// then writes its own replica.
void TrainSession::save_checkpoint() {
  const std::string path = ckpts_->file_for(step_);
  if (update_->shard()) {
    save_checkpoint_streamed(path);
  } else {
    save_checkpoint_with([&](const CheckpointMeta& m, const optim::Optimizer& opt) {
      if (writer_)
        or_abort_all(fmt::format("rank 0 failed to write the checkpoint {}", path),
                     [&] { saver_->write_now(step_, *model_, opt, m); });
      comm_->barrier();  // every rank waits until the checkpoint is complete
    });
  }
  if (writer_)
    lg()->info("checkpoint {} ({:.1f} MB in {:.2f} s)", path, std::filesystem::file_size(path) / 1e6,
               seconds_since(last_ckpt_time_));
}

// train.zero = 1, 2: the optimizer state streamed a bucket at a time (WeightUpdate::stream_state,
// collective) into the files this rank writes as it arrives (rank 0's checkpoint, each rank's
// replica with checkpoint.replicas): no rank holds more of the state than its shard and one
// bucket. The files are the bytes save_checkpoint_with's whole state would give. Then the barrier.
void TrainSession::save_checkpoint_streamed(const std::string& path) {
  last_ckpt_time_ = Clock::now();
  const CheckpointMeta m = checkpoint_meta();
  const std::vector<CheckpointEntry> layout = checkpoint_layout(*model_, state_slots(update_->optimizer()));
  run_streamed_save(fmt::format("rank 0 failed to write the checkpoint {}", path), [&] {
    const std::unique_ptr<CheckpointStream> main = writer_ ? saver_->open_stream(step_, layout, m) : nullptr;
    if (main) main->append_model();
    const std::unique_ptr<CheckpointStream> copy = open_replica_stream(layout, m);
    update_->stream_state(state_sink({main.get(), copy.get()}, {}));
    if (main) saver_->commit_stream(step_, *main);
    if (copy) copy->commit();
  });
  comm_->barrier();  // every rank waits until the checkpoint is complete
  last_saved_ = step_;
}

// ZeRO's saves: `save` under or_abort_all where this rank writes a file (rank 0's checkpoint or
// snapshot, `what`; a replica), plainly where it only takes part in the stream.
void TrainSession::run_streamed_save(const std::string& what, const std::function<void()>& save) {
  if (!writer_ && !cfg_.checkpoint.replicas) return save();
  const std::string replica = replica_path();
  or_abort_all(writer_ ? what + (cfg_.checkpoint.replicas ? fmt::format(" or its replica {}", replica) : "")
                       : fmt::format("rank {} failed to write its replica {}", rank_, replica),
               save);
}

// With checkpoint.replicas: this rank's replica opened for a streamed save, its model tensors in.
std::unique_ptr<CheckpointStream> TrainSession::open_replica_stream(const std::vector<CheckpointEntry>& layout,
                                                                    const CheckpointMeta& m) {
  if (!cfg_.checkpoint.replicas) return nullptr;
  std::filesystem::create_directories(run_->file("replicas"));
  auto s = std::make_unique<CheckpointStream>(replica_path(), layout, m);
  s->append_model();
  return s;
}

std::string TrainSession::replica_path() const {
  return run_->file(fmt::format("replicas/replica-rank{}.safetensors", rank_));
}

// What both saves do around their write when every rank holds the whole optimizer state
// (train.zero = 0; the sharded state is streamed: save_checkpoint_streamed*): the save's time
// (checkpoint.every_s counts from it), its metadata and the state handed to `write`, then the
// replicas and last_saved_. Collective: a barrier first, so nothing is written unless every rank
// finished the step (a rank whose loss was not finite stops after its backward, when the others
// may have updated with its gradients; the streamed saves are collective from their first bucket).
void TrainSession::save_checkpoint_with(
    const std::function<void(const CheckpointMeta&, const optim::Optimizer&)>& write) {
  if (world_ > 1) comm_->barrier();
  last_ckpt_time_ = Clock::now();
  const CheckpointMeta m = checkpoint_meta();
  const optim::Optimizer& opt = update_->optimizer();
  write(m, opt);
  if (cfg_.checkpoint.replicas) write_replica(m, opt);
  last_saved_ = step_;
}

// A checkpoint between two steps of the run (checkpoint.every_steps, checkpoint.every_s).
void TrainSession::checkpoint_during_training() {
  if (cfg_.checkpoint.async) save_checkpoint_in_background();
  else save_checkpoint();
}

// checkpoint.async: rank 0 copies the state into its host snapshot and a thread writes the file
// while every rank goes on (save_checkpoint_with's barrier before the snapshot, none after it:
// nobody waits for the file; a failed write is reported by rank 0 and training goes on). Every
// rank still counts it saved: the decisions that read last_saved_ (a stop's checkpoint) stay the
// same on every rank. Replicas are written now.
void TrainSession::save_checkpoint_in_background() {
  if (update_->shard()) {
    save_checkpoint_streamed_in_background();
    return;
  }
  save_checkpoint_with([&](const CheckpointMeta& m, const optim::Optimizer& opt) {
    if (writer_)
      or_abort_all(fmt::format("rank 0 failed to snapshot the checkpoint of step {}", step_), [&] {
        saver_->start(step_, *model_, opt, m, gpu_ ? gpu_->compute_stream() : nullptr);
      });
  });
}

// checkpoint.async under train.zero = 1, 2: rank 0's host snapshot filled from the streamed state
// (CheckpointSaver::start_streamed; the snapshot is the one whole copy), each rank's replica
// written from the same stream now. Collective (the stream); no barrier, as for zero 0.
void TrainSession::save_checkpoint_streamed_in_background() {
  last_ckpt_time_ = Clock::now();
  const CheckpointMeta m = checkpoint_meta();
  const std::vector<CheckpointEntry> layout = checkpoint_layout(*model_, state_slots(update_->optimizer()));
  run_streamed_save(fmt::format("rank 0 failed to snapshot the checkpoint of step {}", step_), [&] {
    const std::unique_ptr<CheckpointStream> copy = open_replica_stream(layout, m);
    if (writer_)
      saver_->start_streamed(step_, layout, m, [&](const optim::StateSink& snapshot) {
        update_->stream_state(state_sink({copy.get()}, snapshot));
      });
    else
      update_->stream_state(state_sink({copy.get()}, {}));
    if (copy) copy->commit();
  });
  last_saved_ = step_;
}

void TrainSession::write_replica(const CheckpointMeta& m, const optim::Optimizer& opt) {
  const std::string replica = replica_path();
  or_abort_all(fmt::format("rank {} failed to write its replica {}", rank_, replica), [&] {
    std::filesystem::create_directories(run_->file("replicas"));
    write_checkpoint(replica, *model_, opt, m);
  });
}

// Collective: the run ends at this step, with its checkpoint on disk. A background write of it
// in flight is waited for; only rank 0 knows whether that write failed, so its verdict goes to
// every rank (one all-reduce, at the end only) and, failed, the checkpoint is written again now,
// as a synchronous save (which fails the job if it fails again).
void TrainSession::checkpoint_at_the_end() {
  bool missing = last_saved_ != step_;
  if (!missing && cfg_.checkpoint.async) {
    Tensor failed = Tensor::zeros({1}, DType::I32);
    if (saver_) saver_->wait();
    failed.data<int32_t>()[0] = saver_ && saver_->last_written() != step_ ? 1 : 0;
    if (world_ > 1) comm_->allreduce(failed, ReduceOp::Max);
    missing = failed.data<int32_t>()[0] != 0;
    if (missing) lg()->warn("writing the checkpoint of step {} again, now: its background write failed", step_);
  }
  if (missing) save_checkpoint();
  else if (saver_) saver_->wait();
}

// After a failure: what the same command does when run again (for the error's last words).
std::string TrainSession::what_a_rerun_does() const {
  if (!ckpts_) return "";  // failed before the run directory: nothing of this run is on disk
  if (saver_) saver_->wait();  // a background write in flight: done, and its outcome known
  const int64_t last = saver_ ? saver_->last_written() : last_saved_;
  if (last < 0) return "no checkpoint was written yet: a rerun starts over";
  const std::string ckpt = fmt::format("the checkpoint of step {} ({}) is intact", last, ckpts_->file_for(last));
  if (options_.reset) return ckpt + ": run again without --reset to resume from it";
  if (!cfg_.checkpoint.resume) return ckpt + ": run again with checkpoint.resume = true to resume from it";
  return ckpt + ": run the same command again to resume from it";
}

// Where the run is (step, and the data stream's position) and what it was made with.
CheckpointMeta TrainSession::checkpoint_meta() const {
  CheckpointMeta m;
  m.step = step_;
  m.epoch = cur_epoch_;
  m.epoch_samples = cur_samples_;
  m.seed = seed_;
  m.world_size = world_;
  m.batch_size = plan_.batch_size;
  m.global_batch = replanned_global_batch(cfg_.train, plan_, world_);
  m.dataset_size = plan_.train_samples;
  m.shuffle = cfg_.data.shuffle;
  m.drop_last = cfg_.data.drop_last;
  m.dtype_policy = fmt::format("params f32, optimizer state f32, compute {}", enum_name(cfg_.train.precision));
  m.optimizer = update_->optimizer().name();
  m.optimizer_steps = update_->optimizer().steps();
  m.config = to_toml(cfg_);
  m.classes = classes_json(classes_);
  return m;
}

// ---------------------------------------------------------------------------------------------
// The ends of a run.

// Resumed at (or beyond) the last step: the final weights if they are missing, one evaluation.
TrainResult TrainSession::already_complete() {
  lg()->info("the run is already complete at step {}; nothing to train (--reset starts over)", step_);
  // A run stopped after its last checkpoint but before its final weights gets them now.
  if (cfg_.checkpoint.final && writer_ && !std::filesystem::exists(run_->file("final.safetensors")))
    write_final_weights();
  evaluate_and_log(fmt::format("at step {}", step_), cur_epoch_);
  result_.steps = step_;
  result_.seconds = seconds_since(t_start_);
  return result_;
}

// TrainOptions::stop_after_steps: a checkpoint (unless there is one) and out, as a preempted
// job would.
void TrainSession::stop_as_asked() {
  checkpoint_at_the_end();
  lg()->info("stopping after step {} as asked; resume continues from {}", step_, ckpts_->file_for(step_));
  finish_telemetry();
  result_.steps = step_;
  result_.seconds = seconds_since(t_start_);
}

// Every rank stops for `sig` after the current step: a checkpoint of it (unless there is one),
// SIGUSR1 requeues the Slurm job from rank 0.
void TrainSession::stop_for(int sig) {
  tel_->end_progress_line();
  const std::string why = StopRequest::received() == sig ? fmt::format("{} received", strsignal(sig))
                                                         : fmt::format("another rank received {}", strsignal(sig));
  lg()->warn("stopping after step {}: {}{}", step_, why, last_saved_ == step_ ? "" : "; writing a checkpoint");
  checkpoint_at_the_end();
  result_.stop_signal = sig;
  if (sig == SIGUSR1 && rank_ == 0) {
    std::string message;
    result_.requeued = requeue_slurm_job(message);
    if (result_.requeued) lg()->warn("{}; it resumes from {}", message, ckpts_->file_for(step_));
    else lg()->warn("{}", message);
  }
  if (sig != SIGUSR1 || rank_ != 0)
    lg()->warn("stopped at step {} ({}); run the same command again to resume from {}", step_, strsignal(sig),
               ckpts_->file_for(step_));
  finish_telemetry();
  result_.steps = step_;
  result_.seconds = seconds_since(t_start_);
}

// The last step is done: its checkpoint, the telemetry's end, the GPU's memory, the final weights.
TrainResult TrainSession::finish() {
  result_.steps = step_;
  checkpoint_at_the_end();
  finish_telemetry();
  if (gpu_) report_gpu_memory();
  result_.seconds = seconds_since(t_start_);
  if (cfg_.checkpoint.final && writer_) write_final_weights();
  const EvalResult& e = result_.final_eval;
  if (e.tokens)
    lg()->info("done: {} in {}, final eval loss {:.4f} ppl {:.3f} token top1 {:.4f}", counted(step_, "step"),
               hms(result_.seconds), e.loss, e.ppl(), e.top1);
  else
    lg()->info("done: {} in {}, final eval top1 {:.4f} top5 {:.4f} loss {:.4f}", counted(step_, "step"),
               hms(result_.seconds), e.top1, e.top5, e.loss);
  return result_;
}

// The per-layer profile's window is over (or the run ended inside it): its spans go to this
// rank's trace; rank 0 writes <run>/layers.json and logs the table.
void TrainSession::finish_layer_profile() {
  const metrics::LayerProfile p =
      layers_->finish(metrics::node_infos(*model_), device_.str(), std::string(enum_name(cfg_.train.precision)),
                      dtype_name(gpu_ ? gpu_->compute() : DType::F32));
  tel_->layer_spans(p);
  if (rank_ != 0) return;
  run_->write_text("layers.json", metrics::layers_json(p));
  tel_->end_progress_line();
  lg()->info("{}\nlayer profile written to {}", metrics::layer_table(p), run_->file("layers.json"));
}

// Collective (the trace allgather): the trace and the communication overlap summary; a per-layer
// profile cut short by the run's end first.
void TrainSession::finish_telemetry() {
  if (layers_->pending()) finish_layer_profile();
  else if (!layers_->window().empty() && !layers_->finished() && rank_ == 0)
    lg()->warn("profile.layers = \"{}\": no step of the window ran in this run (steps {}..{}); no layers.json written",
               cfg_.profile.layers, std::max<int64_t>(result_.resumed_from_step, 0) + 1, step_);
  const std::string overlap = tel_->finish(*boot_, *run_);
  if (!overlap.empty()) lg()->info("{}", overlap);
}

void TrainSession::report_gpu_memory() {
  gpu_->synchronize();
  const uint64_t peak = gpu_->peak_bytes(), reserved = gpu_->reserved_peak_bytes();
  lg()->info("peak device memory {:.1f} MiB in use ({:.1f} MiB reserved by the pool){}", peak / 1048576.0,
             reserved / 1048576.0,
             gpu_->skipped_steps() ? fmt::format("; {} fp16 step(s) skipped for inf/NaN", gpu_->skipped_steps()) : "");
  if (rank_ == 0)
    run_->append_metrics({{"split", "device"}, {"peak_device_memory_bytes", peak}, {"reserved_high_bytes", reserved},
                          {"skipped_steps", gpu_->skipped_steps()}, {"loss_scale", gpu_->loss_scale()}});
}

void TrainSession::report_memory_breakdown() {
  if (gpu_) gpu_->synchronize();
  const MemoryBreakdown b = memory_breakdown();
  const uint64_t live = gpu_ ? gpu_->live_bytes() : 0, peak = gpu_ ? gpu_->peak_bytes() : 0;
  const ZeroShard* zero = update_->shard();
  if (zero && zero->stage() == 2) {  // every rank's own log: its share of the state and of the gradients
    const MappedUse g = memory_sample_mapped(model_->grads().flat().raw());
    lg()->info("memory after step {}: optimizer state {} bytes on this rank (train.zero = {}: {} of the {} "
               "parameters); gradients {} bytes resident of the arena's {} (at most {}: the rank's pieces and the "
               "partial pages around them; {} at the step's high, buckets in flight{})",
               step_, b.live[static_cast<size_t>(MemoryCategory::OptimizerState)], cfg_.train.zero,
               zero->layout().numel, model_->params().numel(), g.resident, g.bytes, zero->kept_grad_bytes_bound(),
               g.peak, plan_.accum > 1 ? " and the micro-batches before the last one, full size" : "");
  } else if (zero) {  // every rank's own log: its share of the optimizer state
    lg()->info("memory after step {}: optimizer state {} bytes on this rank (train.zero = {}: {} of the {} parameters)",
               step_, b.live[static_cast<size_t>(MemoryCategory::OptimizerState)], cfg_.train.zero,
               zero->layout().numel, model_->params().numel());
  }
  if (rank_ != 0) return;
  tel_->end_progress_line();
  lg()->info("memory after step {} by category ({}; the account sees tensors, not cuDNN/cuBLAS workspace or layers' "
             "own device buffers):\n{}",
             step_, device_.str(), memory_table(b, live, peak));
  // Beside it, what `dptrain memory` plans for this run (the same step plan the CPU places).
  const size_t master = model_->compute_params().defined() ? model_->params().flat().nbytes() : 0;
  const MemoryEstimate planned = estimate_memory(cfg_, *model_, plan_.batch_size, world_, boot_->local_size());
  lg()->info("memory after step {}, planned (dptrain memory, batch {} per rank) beside measured:\n{}", step_,
             plan_.batch_size, memory_vs_plan_table(planned, measured_by_planned_category(b, master, gpu_ != nullptr)));
  // On a GPU the account by layer; on the CPU every activation is in the step plan's arena, so its
  // largest tensors (bytes shared by lifetime).
  const auto line = [](const std::string& name, const std::string& kind, size_t bytes) {
    return fmt::format("\n  {:<28} {:<16} {:>10.1f} MiB", name, kind, static_cast<double>(bytes) / 1048576.0);
  };
  std::string top;
  if (gpu_) {
    top = model_->gpu_step_arena()
              ? fmt::format("the layers holding the most of their own tensors (their outputs and input gradients are in "
                            "the step arena, {:.1f} MiB):",
                            static_cast<double>(model_->step_arena_bytes()) / 1048576.0)
              : "the layers holding the most (their outputs, their backward's input gradients, their own tensors):";
    for (const auto& [node, bytes] : memory_by_node(10))
      if (node < static_cast<int>(model_->nodes().size())) {
        const Layer& l = *model_->nodes()[static_cast<size_t>(node)].layer;
        top += line(l.name(), l.type(), bytes);
      }
  } else {
    top = "the step plan's largest tensors (in one arena: tensors that are never live together share bytes):";
    for (const LargeTensor& t : planned.largest) top += line(t.name, t.layer, t.bytes);
  }
  lg()->info("{}", top);
  // On a GPU the same figures go to metrics.jsonl (beside the run's "device" line); a CPU run's
  // metrics keep their train and eval lines only.
  if (gpu_) run_->append_metrics(nlohmann::json::parse(memory_json(b, step_, live, peak)));
}

// <run>/final.safetensors: the model's state (no optimizer), for inference and fine-tuning.
void TrainSession::write_final_weights() {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& nt : model_->state()) tensors.emplace_back(nt.name, nt.tensor);
  write_safetensors(run_->file("final.safetensors"), tensors,
                    {{"format", "dptrain-weights"}, {"format_version", "1"}, {"step", std::to_string(step_)},
                     {"config", to_toml(cfg_)}, {"classes", classes_json(classes_)}});
}

}  // namespace dp::launch
