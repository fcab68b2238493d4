#include "launch/train_setup.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/isa.h"
#include "models/build.h"
#include "models/weights_import.h"
#include "runtime/cuda/device_choice.h"
#include "runtime/data/sampler.h"
#include "runtime/device_memory.h"
#include "runtime/log.h"
#include "launch/telemetry/step_range.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/param_groups.h"
#include "runtime/optim/sgd.h"
#include "runtime/suggest.h"

extern "C" void openblas_set_num_threads(int);

namespace dp::launch {

Device choose_device(cuda::DeviceRequest wanted, int local_rank, int local_size, CollectiveBackend backend) {
  const cuda::DeviceChoice c =
      cuda::choose_local_device(wanted, local_rank, local_size, cuda_device_count(), backend);
  if (!c.note.empty()) log::get("train")->info("{}", c.note);
  return c.device;
}

// train.precision = "bf16" on the CPU: oneDNN's bf16 matmuls (the oneDNN backend) on AVX-512-BF16 or AMX.
static void check_cpu_bf16(CpuBackend backend) {
  const std::string isa = kernels::cpu::onednn_isa_name();
  if (kernels::cpu::cpu_bf16_path(isa) == kernels::cpu::CpuBf16Path::None)
    DP_THROW_USER("{}", kernels::cpu::cpu_bf16_refusal(isa, kernels::cpu::onednn_isa_limit()));
  if (backend != CpuBackend::OneDnn)
    DP_THROW_USER("train.precision = \"bf16\" on the CPU runs its matmuls on oneDNN, and train.cpu_backend = "
                  "\"reference\" computes in fp32 only: set train.cpu_backend = \"onednn\" or train.precision = "
                  "\"fp32\"");
}

void check_device_choices(const Config& cfg, const Device& device) {
  if (cfg.train.precision == Precision::Fp16 && device.is_cpu())
    DP_THROW_USER("train.precision = \"fp16\" needs a GPU and this process trains on the CPU, which computes in fp32 "
                  "or bf16: set train.precision = \"bf16\" or \"fp32\", or train on a GPU (train.device = \"cuda\")");
  if (cfg.train.precision == Precision::Bf16 && device.is_cpu()) check_cpu_bf16(cfg.train.cpu_backend);
  // profile.steps is Nsight's capture range (cudaProfilerStart/Stop): checked here, used by the
  // CUDA path; the CPU has profile.trace_steps (checked here too, used by Telemetry) and
  // profile.layers.
  metrics::parse_step_range(cfg.profile.trace_steps, "profile.trace_steps");
  metrics::parse_step_range(cfg.profile.layers, "profile.layers");  // any device (TrainSession's LayerProfiler)
  if (!metrics::parse_step_range(cfg.profile.steps, "profile.steps").empty() && device.is_cpu())
    log::get("train")->warn(
        "profile.steps = \"{}\" marks an Nsight Systems capture range, which needs training on a GPU; this run is on "
        "the CPU and ignores it (profile.trace_steps writes trace.json on any device)",
        cfg.profile.steps);
  if (cfg.data.synthetic_device == data::SyntheticDevice::Cuda && device.is_cpu())
    log::get("train")->warn(
        "data.synthetic_device = \"cuda\" makes the synthetic batches on a GPU; this run is on the CPU, where the "
        "loader makes them");
  if (cfg.dist.backend == CollectiveBackend::Nccl && device.is_cpu())
    DP_THROW_USER("dist.backend = \"nccl\" needs GPUs and this process trains on the CPU; use dist.backend = \"ring\"");
}

void set_cpu_threads(int64_t threads) {
  if (threads <= 0) return;
  omp_set_num_threads(static_cast<int>(threads));  // OpenBLAS (OpenMP build) follows
  openblas_set_num_threads(static_cast<int>(threads));
}

std::string cpu_threads_summary() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  std::string wait = policy ? fmt::format("OMP_WAIT_POLICY={}", policy) : "";
  if (spin) wait += fmt::format("{}GOMP_SPINCOUNT={}", wait.empty() ? "" : ", ", spin);
  return fmt::format("CPU threads: {} (OpenMP, shared by oneDNN, OpenBLAS and the own kernels; waits: {})",
                     omp_get_max_threads(), wait.empty() ? "libgomp's default spin" : wait);
}

namespace {

std::unique_ptr<optim::Optimizer> make_rule(const TrainConfig& t, int64_t numel) {
  switch (t.optimizer) {
    case optim::OptimizerKind::Sgd: {
      optim::SgdOptions o;
      o.momentum = t.momentum;
      o.dampening = t.dampening;
      o.nesterov = t.nesterov;
      o.weight_decay = t.weight_decay;
      if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
        DP_THROW_USER("train.nesterov = true needs train.momentum > 0 and train.dampening = 0 (as in torch.optim.SGD)");
      return optim::make_sgd(numel, o);
    }
    case optim::OptimizerKind::AdamW: {
      optim::AdamWOptions o;
      o.beta1 = t.beta1;
      o.beta2 = t.beta2;
      o.eps = t.eps;
      o.weight_decay = t.weight_decay;
      return optim::make_adamw(numel, o);
    }
  }
  DP_CHECK(false, "train.optimizer {} is not handled", static_cast<int>(t.optimizer));
  return nullptr;
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& t, const Arena& params) {
  std::unique_ptr<optim::Optimizer> opt = make_rule(t, params.numel());
  if (t.weight_decay != 0) opt->skip_decay(optim::decay_skip_spans(params, t.decay_params));
  return opt;
}

std::unique_ptr<optim::Optimizer> make_shard_optimizer(const TrainConfig& t, const Arena& params,
                                                       const ShardLayout& layout) {
  std::unique_ptr<optim::Optimizer> opt = make_rule(t, layout.numel);
  if (t.weight_decay != 0) {
    const auto spans = arena_spans_in_shard(layout, optim::decay_skip_spans(params, t.decay_params));
    if (!spans.empty()) opt->skip_decay(spans);
  }
  return opt;
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

StepPlan plan_steps(const Config& cfg, int64_t train_samples, int world) {
  StepPlan p;
  p.batch_size = cfg.train.batch_size;
  p.accum = cfg.train.accum_steps;
  p.train_samples = train_samples;
  const int64_t bs = p.batch_size;
  const int64_t per_rank = data::sampler_num_samples(train_samples, world, cfg.data.drop_last);
  const int64_t batches_per_epoch = cfg.data.drop_last ? per_rank / bs : (per_rank + bs - 1) / bs;
  p.steps_per_epoch = (batches_per_epoch + p.accum - 1) / p.accum;
  if (p.steps_per_epoch == 0)
    DP_THROW_USER("train.batch_size = {} is larger than the {} training samples with data.drop_last = true", bs,
                  train_samples);
  p.total = cfg.train.steps > 0 ? cfg.train.steps : p.steps_per_epoch * cfg.train.epochs;
  p.epochs = (p.total + p.steps_per_epoch - 1) / p.steps_per_epoch;
  try {
    optim::validate_schedule(schedule_of(cfg.train), p.total);
  } catch (const UserError& e) {
    DP_THROW_USER("{}: {}; the run has {} (train.steps or train.epochs) and train.warmup_steps = {}", cfg.source,
                  e.what(), counted(p.total, "step"), cfg.train.warmup_steps);
  }
  return p;
}

namespace {

// What one rank gets of an epoch whose first `skip` samples are consumed: the size of
// data::sampler_indices_after's answer (the skipped prefix off its share when skip is a multiple of
// the world size, else the rest of the order shared out anew).
int64_t rank_samples_after(int64_t n, int world, bool drop_last, int64_t skip) {
  skip = std::clamp<int64_t>(skip, 0, n);
  if (skip % world == 0) return std::max<int64_t>(0, data::sampler_num_samples(n, world, drop_last) - skip / world);
  return data::sampler_num_samples(n - skip, world, drop_last);
}

}  // namespace

int64_t step_at_position(const StepPlan& p, int world, bool drop_last, int64_t epoch, int64_t samples) {
  const int64_t r = rank_samples_after(p.train_samples, world, drop_last, samples);
  const int64_t loaded = drop_last ? r / p.batch_size * p.batch_size : r;  // what the loader hands out
  const int64_t per_step = p.batch_size * p.accum;
  const int64_t steps_left = std::min((loaded + per_step - 1) / per_step, p.steps_per_epoch);
  return epoch * p.steps_per_epoch + p.steps_per_epoch - steps_left;
}

WeightsLoad init_model_weights(const ModelConfig& m, Graph& model) {
  return load_weights(m.init, model, m.init_skip,
                      "Leave tensors at their fresh initialisation with model.init_skip (glob patterns, e.g. "
                      "[\"fc.*\"] for a new classifier), or check that the cfg builds the model these weights are of",
                      models::weights_translator(m));
}

ReducerOptions reducer_options_of(const DistConfig& d, cuda::ExecContext* gpu) {
  ReducerOptions ro;
  ro.first_bucket_bytes = static_cast<int64_t>(d.first_bucket_mb * 1e6);
  ro.bucket_bytes = static_cast<int64_t>(d.bucket_mb * 1e6);
  ro.overlap = d.overlap;
  ro.allow_unused = d.allow_unused;
  ro.wire = wire_dtype(d.compress);
  ro.gpu = gpu;  // device gradients: events and the communication stream
  return ro;
}

void check_model_fits_data(const Graph& model, int64_t num_classes, int64_t block_size) {
  if (block_size > 0) {
    const Shape& out = model.output_shape();  // a padded LM head's rows are longer than its V classes
    if (out.size() != 2 || out[0] != block_size || models::output_width(model) < num_classes)
      DP_THROW_USER("the model's output has per-sample shape {}; token windows need scores per position [T, V] = [{}, "
                    "{}] (model.block_size, model.vocab_size): a language model's logits",
                    shape_str(out), block_size, num_classes);
    return;
  }
  if (model.output_shape().size() != 1)
    DP_THROW_USER("the model's output has per-sample shape {}; the loss needs class scores [K] (end with a linear layer)",
                  shape_str(model.output_shape()));
  if (models::output_width(model) < num_classes)
    DP_THROW_USER("the model outputs {} classes but the data set has {}; set model.num_classes = {}",
                  models::output_width(model), num_classes, num_classes);
}

namespace {

// "a\nb\n" -> {"a", "b"}.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t p = 0;
  for (size_t e; (e = text.find('\n', p)) != std::string::npos; p = e + 1) out.push_back(text.substr(p, e - p));
  return out;
}

}  // namespace

void check_same_model(Bootstrap& boot, const Graph& model) {
  std::string sig;
  for (const auto& nt : model.state())
    sig += fmt::format("{} {} {}", nt.name, dtype_name(nt.tensor.dtype()), shape_str(nt.tensor.shape())) + "\n";
  const std::vector<std::string> all = boot.allgather(sig);
  for (int r = 1; r < static_cast<int>(all.size()); ++r) {
    if (all[r] == all[0]) continue;
    // The first differing line of rank r's signature against rank 0's.
    const std::vector<std::string> a = lines_of(all[0]), b = lines_of(all[r]);
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    DP_THROW_USER("ranks 0 and {} built different models (every rank needs the same cfg): first difference at "
                  "parameter #{}: rank 0 has '{}', rank {} has '{}'",
                  r, k, k < a.size() ? a[k] : "(nothing)", r, k < b.size() ? b[k] : "(nothing)");
  }
}

}  // namespace dp::launch
