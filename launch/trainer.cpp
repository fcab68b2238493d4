#include "launch/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "collectives/bootstrap/factory.h"
#include "collectives/make_communicator.h"
#include "collectives/reducer/reducer.h"
#include "kernels/cpu/elementwise.h"
#include "launch/datasets.h"
#include "launch/batch_feed.h"
#include "launch/evaluate.h"
#include "launch/gpu_run.h"
#include "launch/run_dir.h"
#include "launch/stop_signals.h"
#include "launch/telemetry.h"
#include "models/build.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/cuda/device_choice.h"
#include "runtime/cuda/nvtx.h"
#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"
#include "runtime/device_memory.h"
#include "runtime/log.h"
#include "runtime/metrics/step_range.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/schedule.h"
#include "runtime/optim/sgd.h"
#include "runtime/checkpoint/safetensors.h"

extern "C" void openblas_set_num_threads(int);

namespace dp::launch {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& t, int64_t numel) {
  if (t.optimizer == "sgd") {
    optim::SgdOptions o;
    o.momentum = t.momentum;
    o.dampening = t.dampening;
    o.nesterov = t.nesterov;
    o.weight_decay = t.weight_decay;
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      DP_THROW_USER("train.nesterov = true needs train.momentum > 0 and train.dampening = 0 (as in torch.optim.SGD)");
    return optim::make_sgd(numel, o);
  }
  optim::AdamWOptions o;
  o.beta1 = t.beta1;
  o.beta2 = t.beta2;
  o.eps = t.eps;
  o.weight_decay = t.weight_decay;
  return optim::make_adamw(numel, o);
}

optim::ScheduleOptions schedule_of(const TrainConfig& t) {
  optim::ScheduleOptions s;
  s.kind = t.schedule;
  s.base_lr = t.lr;
  s.warmup_steps = t.warmup_steps;
  s.warmup_start_factor = t.warmup_start_factor;
  s.step_size = t.step_size;
  s.gamma = t.gamma;
  s.min_lr = t.min_lr;
  return s;
}

// Fault injection for resume tests: DPTRAIN_FAULT_KILL_AFTER_STEP=N makes the process
// SIGKILL itself right after step N (and any checkpoint due at N), as `kill -9` would.
int64_t fault_kill_after_step() {
  const char* v = std::getenv("DPTRAIN_FAULT_KILL_AFTER_STEP");
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 1) DP_THROW_USER("DPTRAIN_FAULT_KILL_AFTER_STEP = '{}' is not a step number >= 1", v);
  log::get("train")->warn("DPTRAIN_FAULT_KILL_AFTER_STEP = {}: this process will kill itself after that step", n);
  return n;
}

// Every rank must have built the same model: names, dtypes and shapes, compared with rank 0's.
void check_same_model(Bootstrap& boot, const Graph& model) {
  std::vector<std::string> lines;
  std::string sig;
  for (const auto& nt : model.state()) {
    lines.push_back(fmt::format("{} {} {}", nt.name, dtype_name(nt.tensor.dtype()), shape_str(nt.tensor.shape())));
    sig += lines.back() + "\n";
  }
  const std::vector<std::string> all = boot.allgather(sig);
  for (int r = 1; r < static_cast<int>(all.size()); ++r) {
    if (all[r] == all[0]) continue;
    // The first differing line of rank r's signature against rank 0's.
    std::vector<std::string> a, b;
    for (const auto* src : {&all[0], &all[r]}) {
      auto& dst = src == &all[0] ? a : b;
      size_t p = 0;
      for (size_t e; (e = src->find('\n', p)) != std::string::npos; p = e + 1) dst.push_back(src->substr(p, e - p));
    }
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    DP_THROW_USER("ranks 0 and {} built different models (every rank needs the same cfg): first difference at "
                  "parameter #{}: rank 0 has '{}', rank {} has '{}'",
                  r, k, k < a.size() ? a[k] : "(nothing)", r, k < b.size() ? b[k] : "(nothing)");
  }
}

}  // namespace

Device choose_device(const std::string& wanted, int local_rank, int local_size, const std::string& backend) {
  const cuda::DeviceChoice c = cuda::choose_local_device(cuda::parse_device_request(wanted), local_rank, local_size,
                                                         cuda_device_count(), backend);
  if (!c.note.empty()) log::get("train")->info("{}", c.note);
  return c.device;
}

TrainResult train(const Config& cfg, const TrainOptions& options) {
  const auto t_start = Clock::now();
  // Who this process is: the bootstrap sets the identity every log line and error carries.
  std::unique_ptr<Bootstrap> boot = make_bootstrap(cfg.dist.bootstrap, cfg.dist.timeout_s);
  std::unique_ptr<Communicator> comm = make_communicator(cfg.dist.backend, *boot, cfg.dist.timeout_s);
  const int rank = boot->rank(), world = boot->size();
  log::configure(cfg.run.log_level, "", false, cfg.run.log_levels);  // the console is rank 0's
  auto lg = log::get("train");
  if (world > 1)
    lg->info("{} ranks via the {} bootstrap, {} collectives", world, boot->kind(), comm->backend());
  if (cfg.train.threads > 0) {
    omp_set_num_threads(static_cast<int>(cfg.train.threads));  // OpenBLAS (OpenMP build) follows
    openblas_set_num_threads(static_cast<int>(cfg.train.threads));
  }
  const Device device = choose_device(cfg.train.device, boot->local_rank(), boot->local_size(), cfg.dist.backend);
  if (cfg.train.precision != "fp32" && device.is_cpu())
    DP_THROW_USER("train.precision = \"{}\" needs a GPU and this process trains on the CPU, which computes in fp32: "
                  "set train.precision = \"fp32\" or train on a GPU (train.device = \"cuda\")",
                  cfg.train.precision);
  // profile.steps is Nsight's capture range (cudaProfilerStart/Stop): checked here, used by the
  // CUDA path; the CPU has profile.trace_steps (checked here too, used by Telemetry).
  metrics::parse_step_range(cfg.profile.trace_steps, "profile.trace_steps");
  if (!metrics::parse_step_range(cfg.profile.steps, "profile.steps").empty() && device.is_cpu())
    lg->warn("profile.steps = \"{}\" marks an Nsight Systems capture range, which needs training on a GPU; this "
             "run is on the CPU and ignores it (profile.trace_steps writes trace.json on any device)",
             cfg.profile.steps);
  if (cfg.dist.backend == "nccl" && device.is_cpu())
    DP_THROW_USER("dist.backend = \"nccl\" needs GPUs and this process trains on the CPU; use dist.backend = \"ring\"");
  // The GPU side: streams, handles, workspace, precision, loss scaling, profiler window.
  std::unique_ptr<GpuRun> gpu;
  if (device.is_cuda()) {
    gpu = std::make_unique<GpuRun>(cfg.train, device.index);
    gpu->profile_window(cfg.profile.steps);
    lg->info("training on {} in {}{}, cuDNN/cuBLASLt workspace up to {} MiB", device.str(), cfg.train.precision,
             gpu->channels_last() ? " (activations channels last)" : "", cfg.train.workspace_mb);
  }

  Datasets ds = open_datasets(cfg.data);
  lg->info("data: train {} ({} samples), eval {} samples", ds.train.dataset->describe(), ds.train.indices.size(),
           ds.eval.indices.size());

  const uint64_t seed = static_cast<uint64_t>(cfg.run.seed);
  auto model = models::build_model(cfg.model, ds.train.dataset->sample_shape(), seed, device,
                                   gpu ? gpu->compute() : DType::F32, gpu ? gpu->exec() : nullptr);
  lg->info("model {}: {} parameters\n{}", cfg.model.preset.empty() ? "from [[layer]] list" : cfg.model.preset,
           model->num_parameters(), model->summary());
  if (model->output_shape().size() != 1)
    DP_THROW_USER("the model's output has per-sample shape {}; the loss needs class scores [K] (end with a linear layer)",
                  shape_str(model->output_shape()));
  if (model->output_shape()[0] < ds.train.dataset->num_classes())
    DP_THROW_USER("the model outputs {} classes but the data set has {}; set model.num_classes = {}",
                  model->output_shape()[0], ds.train.dataset->num_classes(), ds.train.dataset->num_classes());

  models::SoftmaxCrossEntropy loss(cfg.train.label_smoothing);
  auto opt = make_optimizer(cfg.train, model->num_parameters());
  opt->place(device, gpu ? gpu->compute_stream() : nullptr);
  const auto sched = schedule_of(cfg.train);

  const int64_t bs = cfg.train.batch_size;
  const int64_t n_train = static_cast<int64_t>(ds.train.indices.size());
  // Steps per epoch follow the rank's share of the data (DistributedSampler's num_samples).
  const int64_t per_rank = data::sampler_num_samples(n_train, world, cfg.data.drop_last);
  // A step is accum_steps micro-batches (the epoch's last step may have fewer).
  const int64_t accum = cfg.train.accum_steps;
  const int64_t batches_per_epoch = cfg.data.drop_last ? per_rank / bs : (per_rank + bs - 1) / bs;
  const int64_t per_epoch = (batches_per_epoch + accum - 1) / accum;
  if (per_epoch == 0)
    DP_THROW_USER("train.batch_size = {} is larger than the {} training samples with data.drop_last = true", bs, n_train);
  const int64_t total = cfg.train.steps > 0 ? cfg.train.steps : per_epoch * cfg.train.epochs;
  const int64_t epochs = (total + per_epoch - 1) / per_epoch;
  try {
    optim::validate_schedule(sched, total);
  } catch (const UserError& e) {
    DP_THROW_USER("{}: {}; the run has {} steps (train.steps or train.epochs) and train.warmup_steps = {}", cfg.source,
                  e.what(), total, cfg.train.warmup_steps);
  }

  // Everything the cfg decides is checked; only now touch the file system.
  RunDir run(cfg.run.dir, cfg.run.name);
  if (rank == 0) run.write_text("config.toml", to_toml(cfg));
  log::configure(cfg.run.log_level, run.file(fmt::format("logs/rank-{}.log", rank)), false, cfg.run.log_levels);
  lg = log::get("train");
  // Warnings reach the file at once (a killed run keeps them); the rest when train() returns or
  // throws (the loggers share their sinks, so flushing one flushes the file).
  for (const char* sub : {"train", "ckpt"}) log::get(sub)->flush_on(spdlog::level::warn);
  struct FlushAtExit {
    ~FlushAtExit() { log::get("train")->flush(); }
  } flush_at_exit;
  lg->info("run directory {}", run.path());

  TrainResult result;
  result.run_dir = run.path();
  const int64_t world_size = world;
  // Rank 0 alone writes and deletes checkpoints (every rank writes its own replica). With more
  // than one rank the others must also wait for the write: that barrier comes with the
  // multi-rank trainer.
  const bool writer = rank == 0;
  const int64_t kill_after = fault_kill_after_step();

  // Resume (or start over). load_checkpoint changes nothing unless the whole file checks out,
  // so a bad newest checkpoint leaves the fresh model for the next candidate.
  CheckpointDir ckpts(run.file("checkpoints"));
  if (writer) ckpts.prepare();
  int64_t step = 0, start_epoch = 0, start_samples = 0, last_saved = -1;
  if (options.reset || !cfg.checkpoint.resume) {
    const int n = writer ? ckpts.remove_all() : 0;
    if (n > 0)
      lg->warn("{}: starting over; deleted {} checkpoint(s) of an earlier run in {}",
               options.reset ? "--reset" : "checkpoint.resume = false", n, ckpts.path());
  } else if (auto r = resume_latest(ckpts, *model, *opt)) {
    if (!r->skipped.empty())
      lg->warn("resuming from the previous good checkpoint {} (step {}) because {} newer one(s) failed their checks "
               "(see above)",
               r->path, r->meta.step, r->skipped.size());
    if (r->meta.step > total)
      DP_THROW_USER("checkpoint '{}' is at step {}, beyond this run's {} steps: raise train.steps or train.epochs, "
                    "or start over with --reset",
                    r->path, r->meta.step, total);
    if (r->meta.dataset_size != n_train || r->meta.shuffle != cfg.data.shuffle || r->meta.drop_last != cfg.data.drop_last)
      lg->warn("checkpoint '{}' was written with {} training samples (shuffle {}, drop_last {}), this run has {} "
               "(shuffle {}, drop_last {}): the rest of the epoch is not the data the interrupted run would have seen",
               r->path, r->meta.dataset_size, r->meta.shuffle, r->meta.drop_last, n_train, cfg.data.shuffle,
               cfg.data.drop_last);
    if (r->meta.batch_size * r->meta.world_size != bs * world_size)
      lg->warn("checkpoint '{}' was written with batch {} x {} rank(s), this run uses {} x {}: the step count goes on "
               "from {}, the epoch from sample {}",
               r->path, r->meta.batch_size, r->meta.world_size, bs, world_size, r->meta.step, r->meta.epoch_samples);
    step = last_saved = r->meta.step;
    start_epoch = r->meta.epoch;
    // epoch_samples counts every rank's samples: the consumed prefix of the epoch's order.
    start_samples = r->meta.epoch_samples;
    result.resumed_from_step = step;
    result.resumed_from = r->path;
    lg->info("resumed from {}: step {}, epoch {}, {} samples of it done", r->path, step, start_epoch + 1,
             start_samples);
  }
  if (world > 1) {
    check_same_model(*boot, *model);
    if (gpu) gpu->synchronize();  // collectives read device tensors that are complete
    // Rank 0's parameters and buffers (fresh or resumed) become everyone's.
    comm->broadcast(model->params().flat(), 0);
    for (const auto& b : model->buffers()) {
      // A broadcast moves bytes: an i64 buffer (num_batches_tracked) travels as a same-size f64 view.
      const Tensor& t = b.tensor;
      comm->broadcast(t.dtype() == DType::I64 ? Tensor::view_of(t.storage(), t.byte_offset(), t.shape(), DType::F64) : t,
                      0);
    }
  }
  model->refresh_compute_params();  // the 16-bit weights follow the (resumed, broadcast) masters
  std::unique_ptr<Reducer> reducer;
  if (world > 1) {
    ReducerOptions ro;
    ro.first_bucket_bytes = static_cast<int64_t>(cfg.dist.first_bucket_mb * 1e6);
    ro.bucket_bytes = static_cast<int64_t>(cfg.dist.bucket_mb * 1e6);
    ro.overlap = cfg.dist.overlap;
    ro.allow_unused = cfg.dist.allow_unused;
    ro.wire = cfg.dist.compress == "bf16" ? DType::BF16 : cfg.dist.compress == "fp16" ? DType::F16 : DType::F32;
    ro.gpu = gpu ? gpu->exec() : nullptr;  // device gradients: events and the communication stream
    reducer = std::make_unique<Reducer>(*comm, *model, ro);
    lg->info("gradient all-reduce: {} buckets ({} MB first, then {} MB), overlap {}, wire {}", reducer->buckets().size(),
             cfg.dist.first_bucket_mb, cfg.dist.bucket_mb, cfg.dist.overlap, dtype_name(ro.wire));
  }
  lg->info("training: {} steps ({} epochs of {} steps, batch {}{}), optimizer {}, lr {} ({})", total, epochs, per_epoch,
           bs, accum > 1 ? fmt::format(" x {} micro-batches", accum) : "", cfg.train.optimizer, cfg.train.lr,
           cfg.train.schedule);

  // Position of the data stream: epoch in progress and the samples of its order consumed.
  int64_t cur_epoch = start_epoch, cur_samples = start_samples;
  auto save = [&]() {
    const auto t0 = Clock::now();
    CheckpointMeta m;
    m.step = step;
    m.epoch = cur_epoch;
    m.epoch_samples = cur_samples;
    m.seed = seed;
    m.world_size = world_size;
    m.batch_size = bs;
    m.dataset_size = n_train;
    m.shuffle = cfg.data.shuffle;
    m.drop_last = cfg.data.drop_last;
    m.dtype_policy = fmt::format("params f32, optimizer state f32, compute {}", cfg.train.precision);
    m.optimizer = opt->name();
    m.optimizer_steps = opt->steps();
    m.config = to_toml(cfg);
    const std::string path = ckpts.file_for(step);
    if (writer) {
      write_checkpoint(path, *model, *opt, m);
      ckpts.commit(step, cfg.checkpoint.keep);
    }
    comm->barrier();  // every rank waits until the checkpoint is complete
    if (cfg.checkpoint.replicas) {
      std::filesystem::create_directories(run.file("replicas"));
      write_checkpoint(run.file(fmt::format("replicas/replica-rank{}.safetensors", process_identity().rank)), *model,
                       *opt, m);
    }
    last_saved = step;
    if (writer)
      lg->info("checkpoint {} ({:.1f} MB in {:.2f} s)", path, std::filesystem::file_size(path) / 1e6,
               seconds_since(t0));
  };
  Telemetry tel(cfg, rank, rank == 0 ? run.path() : "");
  auto eval_line = [&](const std::string& what, int64_t epoch) {
    tel.end_progress_line();
    tel.scalars(step, {{"eval/loss", result.final_eval.loss},
                       {"eval/accuracy", result.final_eval.top1},
                       {"eval/top5", result.final_eval.top5}});
    lg->info("eval {}: loss {:.4f} top1 {:.4f} top5 {:.4f} ({} samples)", what, result.final_eval.loss,
             result.final_eval.top1, result.final_eval.top5, result.final_eval.samples);
    if (rank == 0) run.append_metrics({{"split", "eval"}, {"step", step}, {"epoch", epoch + 1}, {"loss", result.final_eval.loss},
                        {"top1", result.final_eval.top1}, {"top5", result.final_eval.top5},
                        {"samples", result.final_eval.samples}, {"time", seconds_since(t_start)}});
  };

  auto write_final = [&]() {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& nt : model->state()) tensors.emplace_back(nt.name, nt.tensor);
    write_safetensors(run.file("final.safetensors"), tensors,
                      {{"format", "dptrain-weights"}, {"format_version", "1"}, {"step", std::to_string(step)},
                       {"config", to_toml(cfg)}});
  };
  if (step >= total) {
    lg->info("the run is already complete at step {}; nothing to train (--reset starts over)", step);
    // A run stopped after its last checkpoint but before its final weights gets them now.
    if (cfg.checkpoint.final && writer && !std::filesystem::exists(run.file("final.safetensors"))) write_final();
    result.final_eval = evaluate(*model, loss, ds.eval, cfg, step, *comm, gpu.get());
    eval_line(fmt::format("at step {}", step), cur_epoch);
    result.steps = step;
    result.seconds = seconds_since(t_start);
    return result;
  }

  auto finish_telemetry = [&]() {
    const std::string overlap = tel.finish(*boot, run);
    if (!overlap.empty()) lg->info("{}", overlap);
  };
  // Every rank stops for `sig` after the current step: a checkpoint of it (unless there is one),
  // SIGUSR1 requeues the Slurm job from rank 0.
  auto stop_for = [&](int sig) {
    tel.end_progress_line();
    const std::string why = StopRequest::received() == sig ? fmt::format("{} received", strsignal(sig))
                                                           : fmt::format("another rank received {}", strsignal(sig));
    lg->warn("stopping after step {}: {}{}", step, why, last_saved == step ? "" : "; writing a checkpoint");
    if (last_saved != step) save();
    result.stop_signal = sig;
    if (sig == SIGUSR1 && rank == 0) {
      std::string message;
      result.requeued = requeue_slurm_job(message);
      if (result.requeued) lg->warn("{}; it resumes from {}", message, ckpts.file_for(step));
      else lg->warn("{}", message);
    }
    if (sig != SIGUSR1 || rank != 0)
      lg->warn("stopped at step {} ({}); run the same command again to resume from {}", step, strsignal(sig),
               ckpts.file_for(step));
    finish_telemetry();
    result.steps = step;
    result.seconds = seconds_since(t_start);
  };
  // From here on SIGUSR1, SIGTERM and SIGINT stop every rank after the same step. A SIGUSR1 of
  // the start-up (caught since main()) stops the run before its first step.
  StopRequest stop_request;
  if (const int sig = stop_request.agree(*comm)) {
    stop_for(sig);
    return result;
  }
  Tensor dlogits, logits_host, dlogits_dev;
  double last_micro_loss = 0;
  // The GPU's input pipeline (pinned slots, device slots), made once for the run.
  DeviceInputPtr train_input =
      gpu ? make_device_input(*gpu, transform_of(cfg.data, true), *ds.train.dataset, bs, seed)
          : nullptr;
  // One micro-batch's loss, its gradient w.r.t. the logits weighted by `w` (its share of the
  // step; on fp16 also times the loss scale) on the model's device, and its hits. On a GPU the
  // loss runs there and the logits come to the host for the hits.
  auto loss_and_grad = [&](const Tensor& logits, const BatchFeed::Item& b, double w, int64_t& top1,
                           int64_t& top5) -> const Tensor& {
    double lb = 0;
    const Tensor* z = &logits;
    if (gpu) {
      lb = gpu->loss_and_grad(loss, logits, b.y, dlogits_dev, w);  // waits for the forward
      if (!logits_host.defined() || logits_host.shape() != logits.shape()) logits_host = Tensor::zeros(logits.shape());
      logits_host.copy_from(logits);
      z = &logits_host;
    } else {
      if (!dlogits.defined() || dlogits.shape() != logits.shape()) dlogits = Tensor::zeros(logits.shape());
      lb = loss.forward_backward(logits, b.y, &dlogits);
      if (w != 1.0) kernels::cpu::scale(dlogits.data<float>(), dlogits.data<float>(), static_cast<float>(w), dlogits.numel());
    }
    // Under fp16 loss scaling an inf/NaN loss is an overflow like any other: its gradients are
    // inf/NaN too, so the step is skipped and the scale lowered (GradScaler's behaviour).
    if (!std::isfinite(lb) && !(gpu && gpu->scaling()))
      throw DpError(fmt::format("loss became {} at step {} [{}]; lower train.lr or check the data", lb, step,
                                identity_string()));
    count_hits(*z, b.y_host, top1, top5);
    last_micro_loss = lb;
    return gpu ? dlogits_dev : dlogits;
  };
  auto t_window = Clock::now();
  double win_loss = 0;
  int64_t win_samples = 0, win_hits = 0, win_steps = 0;
  double win_step_s = 0, win_comm_s = 0, win_exposed_s = 0;  // per-step times summed over the window
  bool evaluated_last = false;
  for (int64_t epoch = start_epoch; step < total; ++epoch) {
    // Mid-epoch resume: the epoch's order is a function of (seed, epoch), so skipping the
    // consumed prefix (counted over all ranks) gives exactly the samples still to see.
    cur_epoch = epoch;
    cur_samples = epoch == start_epoch ? std::min<int64_t>(start_samples, n_train) : 0;
    std::vector<int64_t> order =
        data::sampler_indices_after(n_train, world, rank, cfg.data.shuffle, seed, epoch, cfg.data.drop_last,
                                    cur_samples, data::permutation_kind(cfg.data.permutation));
    for (auto& i : order) i = ds.train.indices[i];
    // Samples the loader will hand out (drop_last keeps only whole batches).
    const int64_t epoch_rank_samples =
        cfg.data.drop_last ? static_cast<int64_t>(order.size()) / bs * bs : static_cast<int64_t>(order.size());
    BatchFeed feed(*ds.train.dataset, std::move(order), bs, cfg.data.drop_last, transform_of(cfg.data, true), seed,
                   static_cast<uint64_t>(epoch), train_input.get());
    BatchFeed::Item b;
    int64_t taken = 0;  // samples of this epoch's share taken from the loader
    while (step < total && taken < epoch_rank_samples) {
      const auto t_step = Clock::now();
      if (gpu) gpu->before_step(step + 1);
      cuda::NvtxRange nvtx_step("step", gpu != nullptr);
      tel.begin_step(step + 1);
      const StepContext ctx = gpu ? gpu->context(true, seed, static_cast<uint64_t>(step), comm.get())
                                  : StepContext{true, seed, static_cast<uint64_t>(step), comm.get()};
      model->zero_grad();
      // The step's micro-batches: each one's loss gradient is weighted by its share of the
      // step's samples, so the accumulated gradient is that of the mean over all of them.
      const int64_t step_samples = std::min(accum * bs, epoch_rank_samples - taken);
      int64_t n = 0, top1 = 0, top5 = 0;
      double l = 0;
      while (n < step_samples) {
        const auto t_data = Clock::now();
        bool got = false;
        {
          cuda::NvtxRange r("data", gpu != nullptr);
          got = feed.next(b);
        }
        if (!got)
          throw DpError(fmt::format("the data loader ended after {} of {} samples at step {} [{}]", taken + n,
                                    epoch_rank_samples, step, identity_string()));
        const auto t_fwd = Clock::now();
        tel.phase("data", t_data, t_fwd);
        const int64_t nb = b.n;
        const Tensor* dl = nullptr;
        {
          cuda::NvtxRange r("forward", gpu != nullptr);
          const Tensor& logits = model->forward(ctx, b.x);
          dl = &loss_and_grad(logits, b, static_cast<double>(nb) / static_cast<double>(step_samples), top1, top5);
        }
        const double lb = last_micro_loss;
        n += nb;
        l += lb * static_cast<double>(nb);
        const auto t_bwd = Clock::now();
        tel.phase("forward", t_fwd, t_bwd);
        cuda::NvtxRange nvtx_bwd("backward", gpu != nullptr);
        if (reducer && n == step_samples) {  // only the last micro-batch reduces
          reducer->prepare();
          model->backward(ctx, *dl, [&](int node) { reducer->on_ready(node); });
          const auto t_wait = Clock::now();
          tel.phase("backward", t_bwd, t_wait);
          reducer->finalize();  // gradients are now the average over all ranks
          tel.comm(reducer->last_step());
        } else {
          model->backward(ctx, *dl);
          tel.phase("backward", t_bwd, Clock::now());
        }
      }
      l /= static_cast<double>(n);
      taken += n;
      const double lr = optim::lr_at(sched, step, total);
      const auto t_opt = Clock::now();
      {
        cuda::NvtxRange r("optimizer", gpu != nullptr);
        // fp16: unscale the reduced gradients; an inf/NaN skips the step and lowers the scale.
        if (!gpu || gpu->unscale_and_update(*model)) opt->step(model->params().flat(), model->grads().flat(), lr);
        model->refresh_compute_params();
      }
      tel.phase("optimizer", t_opt, Clock::now());
      tel.end_step();
      ++step;
      if (gpu) gpu->after_step(step);
      evaluated_last = false;
      cur_samples += n * world_size;
      win_loss += l * n, win_samples += n, win_hits += top1, ++win_steps;
      win_step_s += seconds_since(t_step);
      if (reducer) win_comm_s += reducer->last_step().comm_s, win_exposed_s += reducer->last_step().exposed_s;
      {
        const double dt = seconds_since(t_window);
        metrics::ProgressState ps;
        ps.epoch = epoch + 1, ps.epochs = epochs, ps.step = step, ps.total_steps = total;
        ps.loss = win_loss / win_samples, ps.accuracy = static_cast<double>(win_hits) / win_samples;
        ps.samples_per_s = win_samples * world / std::max(dt, 1e-9);
        ps.eta_s = metrics::eta_seconds(step, total, dt / win_steps);
        tel.progress(ps, step == total);
      }
      if (step % cfg.train.log_every == 0 || step == total) {
        const double dt = seconds_since(t_window);
        const double sps = win_samples * world / std::max(dt, 1e-9);  // all ranks
        const double eta = (total - step) * (dt / win_steps);
        tel.end_progress_line();
        tel.scalars(step, {{"train/loss", win_loss / win_samples},
                           {"train/accuracy", static_cast<double>(win_hits) / win_samples},
                           {"train/lr", lr},
                           {"perf/samples_per_s", sps},
                           {"perf/step_ms", 1e3 * win_step_s / win_steps},
                           {"perf/comm_ms", 1e3 * win_comm_s / win_steps},
                           {"perf/comm_exposed_ms", 1e3 * win_exposed_s / win_steps}});
        if (gpu && gpu->scaling()) tel.scalars(step, {{"train/loss_scale", gpu->loss_scale()}});
        lg->info("epoch {}/{} step {}/{} loss {:.4f} acc {:.4f} lr {:.3g} {:.0f} samples/s ETA {}", epoch + 1, epochs,
                 step, total, win_loss / win_samples, static_cast<double>(win_hits) / win_samples, lr, sps, hms(eta));
        if (rank == 0) run.append_metrics({{"split", "train"}, {"step", step}, {"epoch", epoch + 1}, {"loss", win_loss / win_samples},
                            {"accuracy", static_cast<double>(win_hits) / win_samples}, {"lr", lr},
                            {"samples_per_s", sps}, {"step_time_s", win_step_s / win_steps},
                            {"comm_total_s", win_comm_s / win_steps}, {"comm_exposed_s", win_exposed_s / win_steps},
                            {"loss_scale", gpu ? gpu->loss_scale() : 1.0},
                            {"skipped_steps", gpu ? gpu->skipped_steps() : 0}, {"time", seconds_since(t_start)}});
        lg->flush();  // the rank's log file follows the run window by window
        t_window = Clock::now();
        win_loss = 0, win_samples = win_hits = win_steps = 0;
        win_step_s = win_comm_s = win_exposed_s = 0;
      }
      if (cfg.checkpoint.every_steps > 0 && step % cfg.checkpoint.every_steps == 0) save();
      if (step == kill_after) {
        lg->warn("DPTRAIN_FAULT_KILL_AFTER_STEP={}: killing this process (SIGKILL)", kill_after);
        log::get("train")->flush();
        std::raise(SIGKILL);
      }
      if (step == options.stop_after_steps) {
        if (last_saved != step) save();
        lg->info("stopping after step {} as asked; resume continues from {}", step, ckpts.file_for(step));
        finish_telemetry();
        result.steps = step;
        result.seconds = seconds_since(t_start);
        return result;
      }
      // A stop signal (SIGUSR1: checkpoint and requeue; SIGTERM/SIGINT: checkpoint and exit)
      // ends the run after the step every rank agrees on; after the last step the run just
      // finishes.
      if (const int sig = step < total ? stop_request.agree(*comm) : 0) {
        stop_for(sig);
        return result;
      }
      if (cfg.train.eval_every > 0 && step % cfg.train.eval_every == 0) {
        result.final_eval = evaluate(*model, loss, ds.eval, cfg, step, *comm, gpu.get());
        evaluated_last = true;
        eval_line(fmt::format("at step {}", step), epoch);
      }
    }
    if (cfg.train.eval_every == 0 || (step == total && !evaluated_last)) {
      result.final_eval = evaluate(*model, loss, ds.eval, cfg, step, *comm, gpu.get());
      eval_line(fmt::format("after epoch {} (step {})", epoch + 1, step), epoch);
    }
  }
  result.steps = step;
  if (last_saved != step) save();
  finish_telemetry();
  if (gpu) {
    gpu->synchronize();
    const uint64_t peak = gpu->peak_bytes(), reserved = gpu->reserved_peak_bytes();
    lg->info("peak device memory {:.1f} MiB in use ({:.1f} MiB reserved by the pool){}", peak / 1048576.0,
             reserved / 1048576.0,
             gpu->skipped_steps() ? fmt::format("; {} fp16 step(s) skipped for inf/NaN", gpu->skipped_steps()) : "");
    if (rank == 0)
      run.append_metrics({{"split", "device"}, {"peak_device_memory_bytes", peak}, {"reserved_high_bytes", reserved},
                          {"skipped_steps", gpu->skipped_steps()}, {"loss_scale", gpu->loss_scale()}});
  }
  result.seconds = seconds_since(t_start);
  if (cfg.checkpoint.final && writer) write_final();
  lg->info("done: {} steps in {}, final eval top1 {:.4f} top5 {:.4f} loss {:.4f}", step, hms(result.seconds),
           result.final_eval.top1, result.final_eval.top5, result.final_eval.loss);
  return result;
}

}  // namespace dp::launch
