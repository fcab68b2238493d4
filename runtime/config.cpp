#include "runtime/config.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <sstream>
#include <variant>

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include "base/quoted.h"
#include "base/utf8.h"
#include "runtime/enum_names.h"
#include "runtime/suggest.h"

namespace dp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A choice key's storage, whatever its enum: the words of the enum's name table (in table order,
// "" included) and the value read and written as a word. Built from a pointer to the enum, so a
// schema line names the field and nothing else: the words come from the table.
struct EnumRef {
  std::vector<std::string> names;
  std::function<std::string()> get;
  std::function<bool(const std::string&)> set;  // false: not one of `names`, nothing written

  template <NamedEnum E>
  EnumRef(E* p)  // NOLINT(google-explicit-constructor): the schema's lines read `&c.train.precision`
      : names(enum_name_list<E>(/*keep_empty=*/true)),
        get([p] { return std::string(enum_name(*p)); }),
        set([p](const std::string& word) {
          const std::optional<E> v = enum_from_name<E>(word);
          if (v) *p = *v;
          return v.has_value();
        }) {}
};

using FieldPtr =
    std::variant<std::string*, int64_t*, double*, bool*, std::vector<double>*, std::vector<int64_t>*,
                 std::vector<std::string>*, EnumRef>;

struct Field {
  std::string section, key, help;
  FieldPtr ptr;
  double min = -kInf, max = kInf;
  std::string full() const { return section + "." + key; }
  const EnumRef* choice() const { return std::get_if<EnumRef>(&ptr); }
};

// [run]
std::vector<Field> run_fields(Config& c) {
  return {
      {"run", "name", "run name: the run directory is <run.dir>/<run.name>", &c.run.name},
      {"run", "dir", "root folder of run directories", &c.run.dir},
      {"run", "seed", "seed for initialisation, shuffling, augmentation and dropout", &c.run.seed, 0, 9.2e18},
      {"run", "log_level", "console and file log level", &c.run.log_level},
      {"run", "log_levels", "per-subsystem log levels overriding log_level, e.g. \"ring=debug,ckpt=warn\"",
       &c.run.log_levels},
      {"run", "tensorboard", "rank 0 writes TensorBoard event files (events.out.tfevents.*) into the run directory", &c.run.tensorboard},
      {"run", "progress_every_s", "seconds between plain progress lines when stdout is not a terminal (0 = none)",
       &c.run.progress_every_s, 0, 1e9},
  };
}

// [data]
std::vector<Field> data_fields(Config& c) {
  return {
      {"data", "dataset",
       "data set kind; synthetic: images of data.synthetic_shape, or, for a model that takes tokens (model.preset = "
       "\"gpt2\"), token windows of model.block_size + 1 uniform random tokens below model.vocab_size",
       &c.data.dataset},
      {"data", "path",
       "where the data is: a folder (IDX: {train,t10k}-*-ubyte[.gz]; CIFAR-10: *.bin; image_folder: train/<class>/<image> "
       "and val/...; npy: {train,val}_{x,y}.npy) or, for tar_shards, the training shards (\"train-{000000..000146}.tar\"); "
       "for tokens, the training token shards (a file, a brace pattern or a glob: \"data/train_*.bin\")",
       &c.data.path},
      {"data", "val_path",
       "image_folder: the evaluation folder (empty: <path>/val); tar_shards and tokens: the evaluation shards",
       &c.data.val_path},
      {"data", "mean",
       "per-channel normalisation mean (inputs scaled to [0, 1] first); image_folder and tar_shards default to "
       "ImageNet's [0.485, 0.456, 0.406], npy to none",
       &c.data.mean},
      {"data", "std",
       "per-channel normalisation standard deviation; image_folder and tar_shards default to ImageNet's "
       "[0.229, 0.224, 0.225], npy to none",
       &c.data.std},
      {"data", "crop_padding", "random crop with this zero padding (0 = off)", &c.data.crop_padding, 0, 1024},
      {"data", "hflip", "random horizontal flip of training samples (image_folder and tar_shards default to true)",
       &c.data.hflip},
      {"data", "image_size", "image data sets: the side of the square samples the model sees", &c.data.image_size, 1,
       65536},
      {"data", "resize",
       "image data sets, evaluation: Resize(resize) (the shorter side) then CenterCrop(image_size); 0: image_size * 8 / 7 "
       "(256 for 224)",
       &c.data.resize, 0, 65536},
      {"data", "random_resized_crop",
       "image data sets, training: RandomResizedCrop(image_size, crop_scale, crop_ratio); false: as evaluation",
       &c.data.random_resized_crop},
      {"data", "crop_scale", "RandomResizedCrop's scale: the range of the crop's share of the image area",
       &c.data.crop_scale},
      {"data", "crop_ratio", "RandomResizedCrop's ratio: the range of the crop's aspect ratio (width / height)",
       &c.data.crop_ratio},
      {"data", "decode_scaled",
       "JPEGs whose crop keeps at least image_size pixels per side at 1/2, 1/4 or 1/8 size are decoded at that size "
       "(much faster for large photos; pixels differ slightly from a full decode, as PIL's draft mode)",
       &c.data.decode_scaled},
      {"data", "skip_bad",
       "images that cannot be decoded, tar samples without a label or image, unsupported image files and empty "
       "class folders are left out (counted in the log) instead of being an error",
       &c.data.skip_bad},
      {"data", "index_dir", "tar_shards: folder of the cached shard indices (empty: <run.dir>/<run.name>/tar-index)",
       &c.data.index_dir},
      {"data", "workers",
       "loader threads per rank (0: image data sets get the rank's share of the cores, others 1)", &c.data.workers, 0,
       1024},
      {"data", "train_limit", "use only the first N training samples (0 = all)", &c.data.train_limit, 0, 9.2e18},
      {"data", "eval_limit", "evaluate on the first N evaluation samples (0 = all)", &c.data.eval_limit, 0, 9.2e18},
      {"data", "shuffle", "shuffle the training set each epoch", &c.data.shuffle},
      {"data", "permutation",
       "shuffle order: philox (dptrain's own) or torch (torch.randperm seeded seed + epoch: DistributedSampler's order)",
       &c.data.permutation},
      {"data", "drop_last", "drop the last incomplete batch", &c.data.drop_last},
      {"data", "synthetic_train", "synthetic data: training samples (token windows for a model that takes tokens)",
       &c.data.synthetic_train, 1, 9.2e18},
      {"data", "synthetic_eval", "synthetic data: evaluation samples, the ones after the training samples",
       &c.data.synthetic_eval, 1, 9.2e18},
      {"data", "synthetic_shape",
       "synthetic images: per-sample shape [C, H, W] (not used for token windows: model.block_size is their shape)",
       &c.data.synthetic_shape, 1, 65536},
      {"data", "synthetic_classes",
       "synthetic images: number of classes (not used for token windows: model.vocab_size is their range)",
       &c.data.synthetic_classes, 2, 1e9},
      {"data", "synthetic_device",
       "synthetic data on a GPU run: cpu (the loader makes the samples, the input pipeline uploads them: end to end) "
       "or cuda (a kernel makes each training batch on the GPU, the same values, no loader and no copy: the inputs "
       "resident on the GPU that PyTorch benchmarks use; no crop or flip)",
       &c.data.synthetic_device},
  };
}

// [model]
std::vector<Field> model_fields(Config& c) {
  return {
      {"model", "preset", "built-in model; empty to use the [[layer]] list", &c.model.preset},
      {"model", "num_classes", "output classes of a preset (0: the data set's class count)", &c.model.num_classes, 0,
       1e9},
      {"model", "hidden", "hidden layer widths of the mlp preset", &c.model.hidden, 1, 16777216},
      {"model", "dropout",
       "dropout probability: before the classifier (mlp, cnn presets); on the attention probabilities, after each "
       "block's attention and MLP and after the embeddings (gpt2)",
       &c.model.dropout, 0, 0.999},
      {"model", "sync_bn", "batch norm statistics over all ranks (SyncBatchNorm)", &c.model.sync_bn},
      {"model", "init",
       "start from these weights: a safetensors file (a torchvision state_dict, a dptrain final.safetensors or "
       "checkpoint); \"\" = fresh initialisation. A resumed run continues from its own checkpoints instead",
       &c.model.init},
      {"model", "init_skip",
       "glob patterns of tensors model.init leaves at their fresh initialisation, e.g. [\"fc.*\"] for a new head",
       &c.model.init_skip},
      {"model", "n_layer", "gpt2: transformer blocks", &c.model.n_layer, 1, 4096},
      {"model", "n_head", "gpt2: attention heads per block (n_embd must be a multiple of n_head)", &c.model.n_head, 1,
       65536},
      {"model", "n_embd", "gpt2: width of the residual stream (embedding dimension)", &c.model.n_embd, 1, 1048576},
      {"model", "block_size", "gpt2: context length T, the positions the model takes; data.dataset = \"tokens\" (and \"synthetic\") "
       "makes samples of T + 1 tokens (inputs: the first T, targets: the last T)",
       &c.model.block_size, 1, 1048576},
      {"model", "vocab_size", "gpt2: vocabulary size: token ids are in [0, vocab_size) (256 for bytes; GPT-2's 50257); every token of the "
       "data must be below it",
       &c.model.vocab_size, 1, 2147483647},
      {"model", "bias", "gpt2: biases in the linear layers and LayerNorms (nanoGPT's bias flag)", &c.model.bias},
  };
}

// [train]
std::vector<Field> train_fields(Config& c) {
  return {
      {"train", "epochs", "passes over the training set", &c.train.epochs, 1, 1e9},
      {"train", "steps", "stop after this many steps (0 = run all epochs)", &c.train.steps, 0, 9.2e18},
      {"train", "batch_size", "samples per step per rank", &c.train.batch_size, 1, 1e9},
      {"train", "optimizer", "optimizer", &c.train.optimizer},
      {"train", "lr", "base learning rate", &c.train.lr, 0, 1e6},
      {"train", "momentum", "SGD momentum", &c.train.momentum, 0, 1},
      {"train", "dampening", "SGD dampening", &c.train.dampening, 0, 1},
      {"train", "nesterov", "SGD Nesterov momentum", &c.train.nesterov},
      {"train", "weight_decay", "weight decay (SGD: L2 in the gradient; AdamW: decoupled)", &c.train.weight_decay, 0, 1e3},
      {"train", "decay_params", "which parameters weight decay applies to: all, or matrices (nanoGPT's rule: parameters "
       "of two or more dimensions decay, biases and normalisation parameters do not)", &c.train.decay_params},
      {"train", "grad_clip", "clip the gradients to this global L2 norm after the all-reduce (torch's "
       "clip_grad_norm_), the same on every rank; 0 = off", &c.train.grad_clip, 0, 1e9},
      {"train", "beta1", "AdamW beta1", &c.train.beta1, 0, 0.999999},
      {"train", "beta2", "AdamW beta2", &c.train.beta2, 0, 0.999999999},
      {"train", "eps", "AdamW epsilon", &c.train.eps, 0, 1},
      {"train", "schedule", "learning-rate schedule", &c.train.schedule},
      {"train", "warmup_steps", "linear warmup steps", &c.train.warmup_steps, 0, 9.2e18},
      {"train", "warmup_start_factor", "learning rate at step 0 as a fraction of lr", &c.train.warmup_start_factor, 0, 1},
      {"train", "step_size", "step schedule: steps between decays", &c.train.step_size, 1, 9.2e18},
      {"train", "gamma", "step schedule: decay factor", &c.train.gamma, 0, 1},
      {"train", "min_lr", "cosine schedule: final learning rate", &c.train.min_lr, 0, 1e6},
      {"train", "label_smoothing", "cross-entropy label smoothing", &c.train.label_smoothing, 0, 1},
      {"train", "eval_every", "evaluate every N steps (0 = at the end of each epoch)", &c.train.eval_every, 0, 9.2e18},
      {"train", "log_every", "steps between progress lines", &c.train.log_every, 1, 9.2e18},
      {"train", "device", "where to train", &c.train.device},
      {"train", "precision", "compute precision: fp32; bf16 (GPU: mixed precision; CPU: the linear products "
       "bf16 x bf16 -> f32 on oneDNN, needs AVX-512-BF16 or AMX, as torch.autocast(\"cpu\", bfloat16)); fp16 (GPU)",
       &c.train.precision},
      {"train", "threads", "CPU threads (0 = all cores)", &c.train.threads, 0, 4096},
      {"train", "cpu_backend", "CPU kernels: oneDNN (convolution, batch norm, pooling, linear; activations channels "
       "last, ReLUs fused) or the reference im2col + BLAS kernels", &c.train.cpu_backend},
      {"train", "cpu_conv_algorithm", "oneDNN convolutions: auto (Winograd for 3x3 stride-1 convolutions with >= 64 "
       "channels in and out where oneDNN runs on AVX-512, direct elsewhere) or direct everywhere",
       &c.train.cpu_conv_algorithm},
      {"train", "cpu_gemm",
       "the linear layers' products on the oneDNN backend: auto (MKL where it is present on an Intel CPU, else "
       "oneDNN's matmul where it runs on AVX-512, OpenBLAS elsewhere), onednn, openblas or mkl (MKL loaded from "
       "DPTRAIN_MKL_DIR; tools/setup.sh fetches it)",
       &c.train.cpu_gemm},
      {"train", "accum_steps", "micro-batches per optimizer step; gradients are reduced once per step",
       &c.train.accum_steps, 1, 1e6},
      {"train", "zero", "ZeRO stage: 0 = every rank keeps the whole optimizer state (DDP); 1 = each rank keeps the "
       "optimizer state of its 1/N of the parameters, gradients are reduce-scattered and the updated parameters "
       "all-gathered; 2 = as 1, and each rank keeps only its 1/N of the gradients (the rest of a bucket's pages are "
       "given back after its reduce-scatter; accum_steps > 1: the micro-batches before the last one hold full-size "
       "gradients). 1 and 2 give the same bits as 0; CPU ranks on the ring backend, fp32, no dist.compress",
       &c.train.zero, 0, 2},
      {"train", "elastic_batch", "a resume at another world size (a smaller Slurm job after a lost node) keeps: "
       "global = the checkpoint's global batch (per-rank batch = global / world, gradient accumulation rising "
       "where that exceeds train.batch_size; an error when the world does not divide it), per_rank = "
       "train.batch_size per rank (the global batch changes with the world)", &c.train.elastic_batch},
  };
}

// [train], the GPU's and mixed precision's keys (after the others in the reference).
std::vector<Field> train_gpu_fields(Config& c) {
  return {
      {"train", "workspace_mb", "GPU: most scratch memory (MiB) one cuDNN or cuBLASLt call may use; algorithms "
       "needing more are not chosen (cuDNN's deterministic attention backward gets its need when larger)",
       &c.train.workspace_mb, 0, 1 << 20},
      {"train", "cudnn_api", "GPU: the cuDNN API of the convolutions: legacy (cudnnConvolution*, algorithms found per "
       "shape) or graph (cuDNN's graph API: engine configs from heuristics timed per shape, bias and ReLU fused into "
       "the forward convolution; docs/cuda.md)", &c.train.cudnn_api},
      {"train", "tf32", "GPU, fp32: TF32 tensor cores for f32 data: off (full f32: cuDNN FMA math, cuBLASLt "
       "COMPUTE_32F), conv (convolutions only: PyTorch's default) or all (convolutions and matmuls)", &c.train.tf32},
      {"train", "bn_impl", "GPU: batch norm in training: cudnn (cuDNN's legacy spatial batch norm), own (dptrain's "
       "one-pass channels-last kernels) or cudnn_ex (cuDNN's persistent NHWC batch norm, deprecated in cuDNN 9; "
       "16-bit channels-last layers only, cudnn elsewhere); docs/cuda.md compares them",
       &c.train.bn_impl},
      {"train", "gpu_fusion", "GPU: fold each ReLU, and each residual add followed by a ReLU, into the batch norm "
       "before it (ResNet's bn -> relu and bn -> add -> relu), each ReLU into the convolution before it under "
       "train.cudnn_api = graph, and each tanh GELU into the linear layer before it (GPT's c_fc -> gelu, cuBLASLt's "
       "GELU epilogue), when nothing else reads the producer's output; off until a GPU run has checked it",
       &c.train.gpu_fusion},
      {"train", "gpu_step_arena", "GPU: place every layer's output and input gradient in one device arena by the "
       "memory plan's lifetimes, as the CPU does (tensors not alive at once share bytes: the planned peak of "
       "`dptrain memory`); false: one allocation per output, kept for the whole step; off until a GPU run has "
       "checked it", &c.train.gpu_step_arena},
      {"train", "loss_scale_init", "fp16: initial dynamic loss scale (halved on inf/NaN, the step skipped)",
       &c.train.loss_scale_init, 1, 1e30},
      {"train", "loss_scale_growth_interval", "fp16: clean steps in a row before the loss scale doubles",
       &c.train.loss_scale_growth_interval, 1, 9.2e18},
  };
}

// [dist]
std::vector<Field> dist_fields(Config& c) {
  return {
      {"dist", "bootstrap", "how ranks find each other: auto, pmix, pmi2, env, slurm, single or file:///shared/dir",
       &c.dist.bootstrap},
      {"dist", "backend", "collectives backend", &c.dist.backend},
      {"dist", "timeout_s", "seconds to wait for peers (bootstrap and every collective)", &c.dist.timeout_s, 1, 1e6},
      {"dist", "bucket_mb", "gradient all-reduce bucket size, MB", &c.dist.bucket_mb, 0.001, 1e4},
      {"dist", "first_bucket_mb", "size of the first (earliest) bucket, MB", &c.dist.first_bucket_mb, 0.001, 1e4},
      {"dist", "overlap", "all-reduce buckets during backward (false: after backward)", &c.dist.overlap},
      {"dist", "allow_unused", "a parameter without a gradient in a step is not an error", &c.dist.allow_unused},
      {"dist", "compress", "gradients travel in 16 bits (bf16 or fp16) and are averaged in f32", &c.dist.compress},
      {"dist", "straggler_ms", "the straggler report (metrics.jsonl, progress line) names the rank that arrived last "
       "at the gradient all-reduces most often when it came this many ms later than the typical rank",
       &c.dist.straggler_ms, 0, 1e9},
      {"dist", "broadcast_buffers",
       "after every step rank 0's buffers (batch norm running statistics) replace the others' (DDP's "
       "broadcast_buffers), so replicas stay identical; unnecessary with model.sync_bn",
       &c.dist.broadcast_buffers},
      {"dist", "iface", "network interface the job uses (e.g. \"eth0\"; NCCL_SOCKET_IFNAME's role): rank 0's TCP "
       "store and every ring listener bind its IPv4 address, which is what ranks advertise; \"\" = MASTER_ADDR for "
       "the store, this host's address for the ring (docs/multi-host.md)", &c.dist.iface},
  };
}

// [checkpoint]
std::vector<Field> checkpoint_fields(Config& c) {
  return {
      {"checkpoint", "final", "write <run>/final.safetensors (weights and buffers) at the end", &c.checkpoint.final},
      {"checkpoint", "every_steps", "write <run>/checkpoints/step-<N>.safetensors every N steps (0 = only at the end)",
       &c.checkpoint.every_steps, 0, 9.2e18},
      {"checkpoint", "keep", "keep the newest K checkpoints, delete older ones (0 = keep all)", &c.checkpoint.keep, 0,
       9.2e18},
      {"checkpoint", "resume", "resume from the run directory's newest good checkpoint (dptrain --reset starts over)",
       &c.checkpoint.resume},
      {"checkpoint", "replicas", "also write <run>/replicas/replica-rank<r>.safetensors (for tools/diffckpt --all)",
       &c.checkpoint.replicas},
      {"checkpoint", "async",
       "write each checkpoint from a background thread while training goes on (a host snapshot is taken between "
       "steps; at most one write in flight, the next save waits for it); the final checkpoint is written as before",
       &c.checkpoint.async},
      {"checkpoint", "every_s",
       "also checkpoint after the step at which this many seconds (wall time, rank 0's clock) passed since the last "
       "checkpoint or the start, bounding the work a failure loses (0 = off); every rank saves at the same step",
       &c.checkpoint.every_s, 0, 1e9},
  };
}

// [profile]
std::vector<Field> profile_fields(Config& c) {
  return {
      {"profile", "steps", "\"A-B\": cudaProfilerStart/Stop around steps A..B (nsys --capture-range=cudaProfilerApi)",
       &c.profile.steps},
      {"profile", "trace_steps", "\"A-B\": write <run>/trace.json (Chrome trace, opens in Perfetto) for steps A..B",
       &c.profile.trace_steps},
      {"profile", "layers", "\"A-B\": time every layer's forward and backward, the loss, the optimizer, the comm and "
       "data waits over steps A..B (CUDA events on a GPU, a clock on the CPU); rank 0 logs the table and writes "
       "<run>/layers.json", &c.profile.layers},
  };
}

// The schema, bound to one Config. Order here is the order of the resolved file and the docs:
// the sections in kSections' order, each section's keys in its table.
std::vector<Field> schema(Config& c) {
  std::vector<Field> all;
  for (auto* section : {&run_fields, &data_fields, &model_fields, &train_fields, &train_gpu_fields, &dist_fields,
                        &checkpoint_fields, &profile_fields}) {
    std::vector<Field> f = section(c);
    all.insert(all.end(), std::make_move_iterator(f.begin()), std::make_move_iterator(f.end()));
  }
  return all;
}

const std::vector<std::string> kSections = {"run", "data", "model", "train", "dist", "checkpoint", "profile", "layer"};

std::string where(const std::string& file, const toml::node& n) {
  return fmt::format("{}:{}", file, n.source().begin.line);
}

std::string describe_node(const toml::node& n) {
  if (n.is_string()) return fmt::format("a string (\"{}\")", *n.value<std::string>());
  if (n.is_integer()) return fmt::format("an integer ({})", *n.value<int64_t>());
  if (n.is_floating_point()) return fmt::format("a float ({})", *n.value<double>());
  if (n.is_boolean()) return fmt::format("a boolean ({})", *n.value<bool>() ? "true" : "false");
  if (n.is_array()) return "an array";
  if (n.is_table()) return "a table";
  return "a date/time";
}

std::string num_str(double x) {
  if (x == kInf) return "inf";
  if (x == -kInf) return "-inf";
  if (x >= 9e18) return "max";
  return fmt::format("{}", x);
}

void check_range(const Field& f, double v, const std::string& pos, const std::string& shown) {
  if (!(v >= f.min && v <= f.max))
    DP_THROW_USER("{}: {} = {} is out of range [{}, {}]", pos, f.full(), shown, num_str(f.min), num_str(f.max));
}

// A number key's value: a float, or an integer that a double holds exactly (|v| <= 2^53). toml++
// answers value<double>() of a larger integer with an empty optional, which must never be read.
double number_of(const Field& f, const toml::node& n, const std::string& pos) {
  if (n.is_floating_point()) return *n.value<double>();
  const int64_t v = *n.value<int64_t>();
  constexpr int64_t kExact = int64_t{1} << 53;
  if (v > kExact || v < -kExact)
    DP_THROW_USER("{}: {} = {} is an integer beyond 2^53, which no number holds exactly; write it as a float (e.g. "
                  "{:.4g}) if you mean it",
                  pos, f.full(), v, static_cast<double>(v));
  return static_cast<double>(v);
}

// A choice: one of the enum's words, else the closest word and all of them (the empty word,
// model.preset's "use the [[layer]] list", is allowed but not offered).
void assign_choice(const Field& f, const EnumRef& e, const toml::node& n, const std::string& pos) {
  if (!n.is_string()) DP_THROW_USER("{}: {} must be a string, got {}", pos, f.full(), describe_node(n));
  const std::string v = *n.value<std::string>();
  if (e.set(v)) return;
  std::vector<std::string> shown;
  for (const auto& c : e.names)
    if (!c.empty()) shown.push_back(c);
  const std::string near = closest_match(v, shown);
  DP_THROW_USER("{}: {} = \"{}\" is not allowed{}; use one of: {}", pos, f.full(), v,
                near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near), join(shown));
}

// Assigns node `n` to field `f`; `pos` names where the value came from.
void assign(const Field& f, const toml::node& n, const std::string& pos) {
  if (const EnumRef* e = f.choice()) return assign_choice(f, *e, n, pos);
  auto wrong = [&](const char* want) {
    DP_THROW_USER("{}: {} must be {}, got {}", pos, f.full(), want, describe_node(n));
  };
  std::visit(
      [&](auto& alt) {
        using A = std::decay_t<decltype(alt)>;
        if constexpr (std::is_pointer_v<A>) {
          using T = std::remove_pointer_t<A>;
          A p = alt;
          if constexpr (std::is_same_v<T, std::string>) {
            if (!n.is_string()) wrong("a string");
            *p = *n.value<std::string>();
          } else if constexpr (std::is_same_v<T, int64_t>) {
            if (!n.is_integer()) wrong("an integer");
            int64_t v = *n.value<int64_t>();
            check_range(f, static_cast<double>(v), pos, std::to_string(v));
            *p = v;
          } else if constexpr (std::is_same_v<T, double>) {
            if (!n.is_number()) wrong("a number");
            double v = number_of(f, n, pos);
            check_range(f, v, pos, n.is_integer() ? std::to_string(*n.value<int64_t>()) : fmt::format("{}", v));
            *p = v;
          } else if constexpr (std::is_same_v<T, bool>) {
            if (!n.is_boolean()) wrong("true or false");
            *p = *n.value<bool>();
          } else if constexpr (std::is_same_v<T, std::vector<double>>) {
            if (!n.is_array()) wrong("an array of numbers");
            std::vector<double> out;
            for (const auto& e : *n.as_array()) {
              if (!e.is_number()) wrong("an array of numbers");
              out.push_back(number_of(f, e, pos));
            }
            *p = out;
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            if (!n.is_array()) wrong("an array of integers");
            std::vector<int64_t> out;
            for (const auto& e : *n.as_array()) {
              if (!e.is_integer()) wrong("an array of integers");
              const int64_t v = *e.value<int64_t>();
              // Each element against the key's range (a size: a huge one would fail later as an
              // allocation error that names no key).
              if (!(static_cast<double>(v) >= f.min && static_cast<double>(v) <= f.max))
                DP_THROW_USER("{}: {}[{}] = {} is out of range [{}, {}]", pos, f.full(), out.size(), v, num_str(f.min),
                              num_str(f.max));
              out.push_back(v);
            }
            *p = out;
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            if (!n.is_array()) wrong("an array of strings");
            std::vector<std::string> out;
            for (const auto& e : *n.as_array()) {
              if (!e.is_string()) wrong("an array of strings");
              out.push_back(*e.value<std::string>());
            }
            *p = out;
          }
        }
      },
      f.ptr);
}

std::vector<std::string> keys_of(const std::vector<Field>& fields, const std::string& section) {
  std::vector<std::string> out;
  for (const auto& f : fields)
    if (f.section == section) out.push_back(f.key);
  return out;
}

ArgValue to_arg(const toml::node& n, const std::string& pos, const std::string& key) {
  if (n.is_integer()) return *n.value<int64_t>();
  if (n.is_floating_point()) return *n.value<double>();
  if (n.is_boolean()) return *n.value<bool>();
  if (n.is_string()) return *n.value<std::string>();
  DP_THROW_USER("{}: layer key '{}' must be a number, boolean or string, got {}", pos, key, describe_node(n));
}

LayerSpec parse_layer(const toml::table& t, const std::string& file, int index) {
  LayerSpec s;
  s.pos = {file, static_cast<int>(t.source().begin.line)};
  const toml::node* type = t.get("type");
  if (!type)
    DP_THROW_USER("{}: [[layer]] #{} is missing the required key 'type'", s.pos.str(), index + 1);
  if (!type->is_string()) DP_THROW_USER("{}: layer.type must be a string, got {}", where(file, *type), describe_node(*type));
  s.type = *type->value<std::string>();
  s.name = s.type + std::to_string(index + 1);
  for (const auto& [k, v] : t) {
    std::string key(k.str());
    std::string pos = where(file, v);
    if (key == "type") continue;
    if (key == "name") {
      if (!v.is_string()) DP_THROW_USER("{}: layer.name must be a string, got {}", pos, describe_node(v));
      s.name = *v.value<std::string>();
    } else if (key == "inputs" || key == "input") {
      if (v.is_string()) s.inputs = {*v.value<std::string>()};
      else if (v.is_array()) {
        for (const auto& e : *v.as_array()) {
          if (!e.is_string()) DP_THROW_USER("{}: layer.inputs must be an array of layer names, got {}", pos, describe_node(e));
          s.inputs.push_back(*e.value<std::string>());
        }
      } else {
        DP_THROW_USER("{}: layer.inputs must be a layer name or an array of names, got {}", pos, describe_node(v));
      }
    } else {
      s.args[key] = to_arg(v, pos, key);
      s.arg_pos[key] = {file, static_cast<int>(v.source().begin.line)};
    }
  }
  return s;
}

void apply_table(Config& c, std::vector<Field>& fields, const toml::table& root, const std::string& file) {
  for (const auto& [k, v] : root) {
    std::string section(k.str());
    std::string pos = where(file, v);
    if (section == "layer") {
      if (!v.is_array_of_tables())
        DP_THROW_USER("{}: 'layer' must be written as [[layer]] tables (an array of tables)", pos);
      int i = 0;
      for (const auto& e : *v.as_array()) c.model.layers.push_back(parse_layer(*e.as_table(), file, i++));
      continue;
    }
    bool known = false;
    for (const auto& s : kSections) known = known || s == section;
    if (!known || !v.is_table()) {
      if (!known && !v.is_table()) {
        // A top-level key: suggest the section.key it probably belongs to.
        std::vector<std::string> all;
        for (const auto& f : fields) all.push_back(f.key);
        std::string near = closest_match(section, all);
        std::string hint;
        for (const auto& f : fields)
          if (f.key == near) hint = fmt::format(" (did you mean '{}' in [{}]?)", f.key, f.section);
        DP_THROW_USER("{}: key '{}' is outside any section{}; sections: {}", pos, section, hint, join(kSections));
      }
      if (!known) {
        std::string near = closest_match(section, kSections);
        DP_THROW_USER("{}: unknown section [{}]{}; sections: {}", pos, section,
                      near.empty() ? "" : fmt::format(" (did you mean [{}]?)", near), join(kSections));
      }
      DP_THROW_USER("{}: '{}' must be a section ([{}]), got {}", pos, section, section, describe_node(v));
    }
    for (const auto& [kk, vv] : *v.as_table()) {
      std::string key(kk.str());
      Field* f = nullptr;
      for (auto& cand : fields)
        if (cand.section == section && cand.key == key) f = &cand;
      if (!f) {
        std::string near = closest_match(key, keys_of(fields, section));
        DP_THROW_USER("{}: unknown key '{}.{}'{}; valid keys in [{}]: {}", where(file, vv), section, key,
                      near.empty() ? "" : fmt::format(" (did you mean '{}.{}'?)", section, near), section,
                      join(keys_of(fields, section)));
      }
      assign(*f, vv, where(file, vv));
      c.given.push_back(f->full());
    }
  }
}

void apply_override(Config& c, std::vector<Field>& fields, const std::string& ov) {
  const std::string pos = fmt::format("--set {}", ov);
  auto eq = ov.find('=');
  auto dot = ov.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    DP_THROW_USER("{}: expected section.key=value (e.g. --set train.lr=0.01)", pos);
  std::string section = ov.substr(0, dot), key = ov.substr(dot + 1, eq - dot - 1), value = ov.substr(eq + 1);
  Field* f = nullptr;
  for (auto& cand : fields)
    if (cand.section == section && cand.key == key) f = &cand;
  if (!f) {
    std::vector<std::string> all;
    for (const auto& cand : fields) all.push_back(cand.full());
    std::string near = closest_match(section + "." + key, all);
    DP_THROW_USER("{}: unknown key '{}.{}'{}", pos, section, key,
                  near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
  }
  // TOML text is UTF-8: a value that is not could not be written to config.toml and read back.
  if (!utf8_valid(value))
    DP_THROW_USER("--set {}.{}: the value is not valid UTF-8 (byte {} of it); give the value as UTF-8 text",
                  section, key, utf8_valid_prefix(value) + 1);
  // The value uses TOML syntax (0.1, true, [1, 2], "text"); a bare word is taken as a string.
  toml::table t;
  try {
    t = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    t = toml::table{{"v", value}};
  }
  assign(*f, *t.get("v"), pos);
  c.given.push_back(f->full());
}

// data.dataset = "synthetic" for a model that takes tokens: token windows, not images.
bool synthetic_tokens(const Config& c) {
  return c.data.dataset == data::DatasetKind::Synthetic && model_takes_tokens(c.model);
}

// Defaults that depend on the data set, for the keys the user did not give: image data sets
// normalise with ImageNet's statistics and flip training samples (torchvision's ResNet recipe);
// arrays and token windows are not normalised; the evaluation's resize follows the image size
// (256 for 224).
void resolve_defaults(Config& c) {
  auto given = [&](const char* key) { return std::find(c.given.begin(), c.given.end(), key) != c.given.end(); };
  const data::DatasetKind k = c.data.dataset;
  if (k == data::DatasetKind::ImageFolder || k == data::DatasetKind::TarShards) {
    if (!given("data.mean")) c.data.mean = {0.485, 0.456, 0.406};
    if (!given("data.std")) c.data.std = {0.229, 0.224, 0.225};
    if (!given("data.hflip")) c.data.hflip = true;
  } else if ((k == data::DatasetKind::Npy || k == data::DatasetKind::Tokens || synthetic_tokens(c)) &&
             !given("data.mean") && !given("data.std")) {
    c.data.mean.clear();
    c.data.std.clear();
  }
  if (c.data.resize == 0) c.data.resize = (c.data.image_size * 8 + 3) / 7;  // round(image_size * 8 / 7)
  if (!given("model.num_classes")) c.model.num_classes = 0;  // the data's count, once the data is open
}

// The image keys: two-value ranges, a resize no smaller than the crop.
void validate_images(const Config& c, const std::string& src) {
  auto range = [&](const char* key, const std::vector<double>& v, double max) {
    if (v.size() != 2 || !(v[0] > 0) || !(v[0] <= v[1]) || !(v[1] <= max))
      DP_THROW_USER("{}: data.{} must be [low, high] with 0 < low <= high{}, got [{}]", src, key,
                    max < kInf ? fmt::format(" <= {}", max) : "", fmt::join(v, ", "));
  };
  range("crop_scale", c.data.crop_scale, 1.0);
  range("crop_ratio", c.data.crop_ratio, kInf);
  if (c.data.resize < c.data.image_size)
    DP_THROW_USER("{}: data.resize = {} is smaller than data.image_size = {}: the centre crop needs resize >= "
                  "image_size",
                  src, c.data.resize, c.data.image_size);
  if (c.data.dataset == data::DatasetKind::TarShards && c.data.val_path.empty())
    DP_THROW_USER("{}: data.dataset = \"tar_shards\" needs data.val_path, the evaluation shards (e.g. "
                  "\"val-{{0000..0006}}.tar\")",
                  src);
  if (c.data.dataset == data::DatasetKind::Tokens && c.data.val_path.empty())
    DP_THROW_USER("{}: data.dataset = \"tokens\" needs data.val_path, the evaluation token shards (e.g. "
                  "\"data/val_*.bin\")",
                  src);
}

// train.zero > 0 (stages 1 and 2) runs on CPU ranks over the ring backend, without gradient
// compression so far: the combinations that are not built are refused here, each naming both keys.
// (A GPU that train.device = "auto" picks is refused where the device is chosen,
// launch/train_session.cpp.) SyncBN works with both stages (its all-reduces are of activations'
// statistics, beside the buckets'), and so does accumulation. train.precision = "bf16" on the CPU
// does too: its parameters, gradients and optimizer are f32 (only the matmuls' operands are cast
// to bf16, in each forward from the weights it finds), so a rank's shard and the all-gathered
// weights are those of fp32; fp16 runs on a GPU only (launch/train_setup.cpp).
void validate_zero(const Config& c, const std::string& src) {
  const int64_t z = c.train.zero;
  if (z == 0) return;
  auto refuse = [&](const std::string& other, const std::string& fix) {
    DP_THROW_USER("{}: train.zero = {} does not work with {} yet (ZeRO runs on CPU ranks over the ring backend, "
                  "without gradient compression); {} or set train.zero = 0", src, z, other, fix);
  };
  if (c.train.device == cuda::DeviceRequest::Cuda) refuse("train.device = \"cuda\"", "set train.device = \"cpu\"");
  if (c.train.precision == Precision::Fp16)
    refuse("train.precision = \"fp16\"", "set train.precision = \"fp32\" or \"bf16\"");
  if (c.dist.backend != CollectiveBackend::Ring)
    refuse(fmt::format("dist.backend = \"{}\"", enum_name(c.dist.backend)), "set dist.backend = \"ring\"");
  if (c.dist.compress != GradCompress::None)
    refuse(fmt::format("dist.compress = \"{}\"", enum_name(c.dist.compress)), "set dist.compress = \"none\"");
}

void validate(const Config& c) {
  const std::string src = c.source.empty() ? "<config>" : c.source;
  // The run directory is <run.dir>/<run.name>: a name with a separator or "." / ".." would put
  // it (and everything the run writes or deletes) somewhere else.
  const std::string& n = c.run.name;
  if (n.empty() || n == "." || n == ".." || n.find_first_of(std::string("/\0", 2)) != std::string::npos)
    DP_THROW_USER("{}: run.name = \"{}\" is not a single folder name (no '/', not empty, '.' or '..'): the run "
                  "directory is <run.dir>/<run.name>; to put runs elsewhere set run.dir (--run-dir)",
                  src, n);
  const bool preset = c.model.preset != PresetKind::None;
  if (!preset && c.model.layers.empty())
    DP_THROW_USER("{}: no model given: set model.preset (one of: {}) or write a [[layer]] list", src,
                  join(enum_name_list<PresetKind>()));
  if (preset && !c.model.layers.empty())
    DP_THROW_USER("{}: both model.preset = \"{}\" and a [[layer]] list are given; keep one", src,
                  enum_name(c.model.preset));
  if (c.data.mean.size() != c.data.std.size())
    DP_THROW_USER("{}: data.mean has {} values but data.std has {}; give one per channel", src, c.data.mean.size(),
                  c.data.std.size());
  for (double s : c.data.std)
    if (!(s > 0)) DP_THROW_USER("{}: data.std values must be > 0, got {}", src, s);
  if (!c.model.init_skip.empty() && c.model.init.empty())
    DP_THROW_USER("{}: model.init_skip is set but model.init is empty: name the weights file to start from "
                  "(model.init = \"weights.safetensors\") or drop model.init_skip",
                  src);
  if (c.model.preset == PresetKind::Gpt2 && c.model.n_embd % c.model.n_head != 0)
    DP_THROW_USER("{}: model.n_embd = {} is not a multiple of model.n_head = {}: each head takes n_embd / n_head "
                  "dimensions; choose n_embd a multiple of n_head (e.g. {})",
                  src, c.model.n_embd, c.model.n_head, (c.model.n_embd / c.model.n_head + 1) * c.model.n_head);
  if (c.data.dataset == data::DatasetKind::Synthetic && !synthetic_tokens(c) && c.data.synthetic_shape.empty())
    DP_THROW_USER("{}: data.synthetic_shape must not be empty", src);
  if (c.data.synthetic_device == data::SyntheticDevice::Cuda) {
    if (c.data.dataset != data::DatasetKind::Synthetic)
      DP_THROW_USER("{}: data.synthetic_device = \"cuda\" makes synthetic batches on the GPU, but data.dataset is "
                    "\"{}\": set data.dataset = \"synthetic\" or drop data.synthetic_device",
                    src, enum_name(c.data.dataset));
    if (c.data.crop_padding != 0 || c.data.hflip)
      DP_THROW_USER("{}: data.synthetic_device = \"cuda\" makes batches without augmentation, but data.crop_padding "
                    "= {} and data.hflip = {}: set data.crop_padding = 0 and data.hflip = false, or data.synthetic_device "
                    "= \"cpu\"",
                    src, c.data.crop_padding, c.data.hflip);
  }
  validate_images(c, src);
  validate_zero(c, src);
}

template <class T>
std::string toml_scalar(const T& v) {
  std::ostringstream os;
  os << toml::value<T>(v);
  return os.str();
}
// A double as TOML: the shortest text that reads back as the same double (0.286, not toml++'s
// 0.28599999999999998), kept a float by a ".0" when it would read as an integer.
template <>
std::string toml_scalar<double>(const double& v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);  // shortest round-trip (fmt's Dragonbox)
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

// A field's value in TOML syntax, as the resolved config.toml and the reference show it.
struct TomlValue {
  std::string operator()(const EnumRef& e) const { return toml_scalar(e.get()); }
  std::string operator()(const std::string* v) const { return toml_scalar(*v); }
  std::string operator()(const bool* v) const { return *v ? "true" : "false"; }
  std::string operator()(const double* v) const { return toml_scalar(*v); }
  std::string operator()(const int64_t* v) const { return std::to_string(*v); }
  template <class T>
  std::string operator()(const std::vector<T>* v) const {
    std::string s = "[";
    for (size_t i = 0; i < v->size(); ++i) s += (i ? ", " : "") + toml_scalar((*v)[i]);
    return s + "]";
  }
};

std::string toml_value(const FieldPtr& p) { return std::visit(TomlValue{}, p); }

// A layer argument's key in TOML syntax: bare where TOML allows it (A-Za-z0-9_-), else quoted, so
// that a key such as "a b" reads back as itself.
std::string toml_key(const std::string& k) {
  const bool bare = !k.empty() && std::all_of(k.begin(), k.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  });
  // A basic string on one line (base/quoted.h), not toml++'s: it writes a string holding a newline
  // as a multi-line string, which TOML does not allow as a key (fuzz_config: "xmo}\ntum=y" = 1 did
  // not read back).
  return bare ? k : quoted_string(k);
}

std::string arg_value(const ArgValue& v) {
  std::ostringstream os;
  switch (v.index()) {
    case 0: os << std::get<int64_t>(v); break;
    case 1: os << toml_scalar(std::get<double>(v)); break;
    case 2: os << (std::get<bool>(v) ? "true" : "false"); break;
    default: os << toml_scalar(std::get<std::string>(v)); break;
  }
  return os.str();
}

Config parse_impl(const std::string& text, const std::string& name, const std::vector<std::string>& overrides) {
  Config c;
  c.source = name;
  auto fields = schema(c);
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    DP_THROW_USER("{}:{}:{}: TOML syntax error: {}", name, e.source().begin.line, e.source().begin.column,
                  std::string(e.description()));
  }
  apply_table(c, fields, root, name);
  for (const auto& ov : overrides) apply_override(c, fields, ov);
  resolve_defaults(c);
  validate(c);
  return c;
}

}  // namespace

Config parse_config(const std::string& text, const std::string& name, const std::vector<std::string>& overrides) {
  return parse_impl(text, name, overrides);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in)
    DP_THROW_USER("cannot read config file '{}': {} (give the path of a model.cfg, e.g. models/fmnist_cnn.cfg)", path,
                  std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_impl(ss.str(), path, overrides);
}

std::string to_toml(const Config& cfg) {
  Config c = cfg;
  auto fields = schema(c);
  std::string out = fmt::format("# dptrain resolved configuration (from {})\n", c.source.empty() ? "defaults" : c.source);
  std::string section;
  for (const auto& f : fields) {
    if (f.section != section) {
      section = f.section;
      out += fmt::format("\n[{}]\n", section);
    }
    out += fmt::format("{} = {}\n", f.key, toml_value(f.ptr));
  }
  for (const auto& l : c.model.layers) {
    // Quoted and escaped as TOML: a backslash or a quote in a layer's type, name or input reads back
    // as itself (fuzz_config: "add\\\\" came back as "add\\").
    out += fmt::format("\n[[layer]]\ntype = {}\nname = {}\n", toml_scalar(l.type), toml_scalar(l.name));
    if (!l.inputs.empty()) {
      std::vector<std::string> q;
      for (const auto& i : l.inputs) q.push_back(toml_scalar(i));
      out += fmt::format("inputs = [{}]\n", join(q));
    }
    for (const auto& [k, v] : l.args) out += fmt::format("{} = {}\n", toml_key(k), arg_value(v));
  }
  return out;
}

std::string config_reference() {
  Config c;
  c.model.num_classes = 0;  // what a cfg without the key gets (resolve_defaults)
  auto fields = schema(c);
  std::string out, section;
  for (const auto& f : fields) {
    if (f.section != section) {
      section = f.section;
      out += fmt::format("\n### [{}]\n\n| key | default | allowed | meaning |\n|---|---|---|---|\n", section);
    }
    std::string allowed;
    if (const EnumRef* e = f.choice()) {
      std::vector<std::string> q;
      for (const auto& ch : e->names) q.push_back("`\"" + ch + "\"`");
      allowed = join(q);
    } else if (f.min != -kInf || f.max != kInf) {
      allowed = fmt::format("[{}, {}]", num_str(f.min), num_str(f.max));
    }
    out += fmt::format("| `{}` | `{}` | {} | {} |\n", f.key, toml_value(f.ptr), allowed, f.help);
  }
  return out;
}

}  // namespace dp
