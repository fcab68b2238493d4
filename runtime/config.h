// defines: Config (the typed run configuration) and load_config (TOML model.cfg + --set overrides).
//
// Every key is declared once in a schema (runtime/config.cpp: name, type, default, range or
// choices, help). A choice key is an enum, parsed once by the schema from the enum's name table
// (runtime/enum_names.h); code downstream switches on it and never sees the word.
// dist.bootstrap stays a string: besides its words it takes a folder (file:///dir), and
// collectives/bootstrap/factory.h is what understands it. The schema drives parsing, validation, the resolved config written to the run
// directory, and `dptrain --print-config-reference`. Problems in the user's file are one
// UserError line naming file:line, the key and the closest valid key or the allowed values.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/bn_impl.h"
#include "runtime/collective_backend.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda/cudnn_api.h"
#include "runtime/cuda/device_choice.h"
#include "runtime/data_choices.h"
#include "runtime/elastic_batch_kind.h"
#include "runtime/grad_compress.h"
#include "runtime/layer_registry.h"
#include "runtime/log_level.h"
#include "runtime/optim/decay_params.h"
#include "runtime/optim/optimizer_kind.h"
#include "runtime/optim/schedule.h"
#include "runtime/precision.h"
#include "runtime/preset_kind.h"

namespace dp {

struct RunConfig {
  std::string name = "default";
  std::string dir = "runs";       // run directory root: <dir>/<name>/
  int64_t seed = 0;
  LogLevel log_level = LogLevel::Info;
  std::string log_levels;          // per subsystem: "ring=debug,ckpt=warn" (overrides log_level)
  bool tensorboard = true;         // rank 0 writes events.out.tfevents.* into the run directory
  int64_t progress_every_s = 10;   // plain progress lines when stdout is not a terminal (0 = per log_every)
};

struct DataConfig {
  data::DatasetKind dataset = data::DatasetKind::FashionMnist;
  std::string path = "/usr/share/datasets/fashion-mnist";
  std::vector<double> mean = {0.2860};
  std::vector<double> std = {0.3530};
  int64_t crop_padding = 0;
  bool hflip = false;
  int64_t train_limit = 0;  // 0 = all training samples
  int64_t eval_limit = 0;   // 0 = all evaluation samples
  bool shuffle = true;
  data::Permutation permutation = data::Permutation::Philox;  // ours, or torch.randperm's (seed + epoch)
  bool drop_last = false;
  int64_t synthetic_train = 10000;
  int64_t synthetic_eval = 1000;
  std::vector<int64_t> synthetic_shape = {3, 32, 32};
  int64_t synthetic_classes = 10;
  data::SyntheticDevice synthetic_device = data::SyntheticDevice::Cpu;  // where synthetic batches are made
  // Image data sets (image_folder, tar_shards): torchvision's transforms.
  std::string val_path;             // image_folder: the evaluation folder ("" = <path>/val); tar_shards, tokens: its shards
  int64_t image_size = 224;         // the side of the square samples the model sees
  int64_t resize = 0;               // evaluation: Resize(resize) then CenterCrop(image_size); 0 = image_size * 8 / 7
  bool random_resized_crop = true;  // training: RandomResizedCrop(image_size) (false: as evaluation)
  std::vector<double> crop_scale = {0.08, 1.0};                // RandomResizedCrop's scale
  std::vector<double> crop_ratio = {3.0 / 4.0, 4.0 / 3.0};     // and ratio
  bool decode_scaled = true;        // JPEGs may be decoded at 1/2, 1/4, 1/8 size when the crop allows
  bool skip_bad = false;            // undecodable or unlabeled samples are left out (else an error)
  std::string index_dir;            // tar_shards: where shard indices are cached ("" = <run>/tar-index)
  int64_t workers = 0;              // loader threads per rank (0 = the rank's share of the cores for images, else 1)
};

struct ModelConfig {
  PresetKind preset = PresetKind::None;  // None: the [[layer]] list
  // Built in code: 10. From a cfg: 0 unless given, which the run resolves to the data's class count
  // (launch/datasets.h resolve_num_classes).
  int64_t num_classes = 10;
  std::vector<int64_t> hidden = {512, 256};  // mlp preset
  double dropout = 0.0;            // mlp/cnn presets; gpt2: attention and residual dropout
  std::vector<LayerSpec> layers;   // the [[layer]] list
  bool sync_bn = false;            // batch norm statistics over all ranks (SyncBatchNorm)
  std::string init;                // starting weights (safetensors); "" = fresh initialisation
  std::vector<std::string> init_skip;  // glob patterns of tensors `init` leaves fresh ("fc.*")
  // The gpt2 preset (nanoGPT's GPTConfig; the defaults are GPT-2 124M). Input: block_size token
  // ids; output: vocab_size logits per position.
  int64_t n_layer = 12;            // transformer blocks
  int64_t n_head = 12;             // attention heads (n_embd must be a multiple)
  int64_t n_embd = 768;            // width of the residual stream
  int64_t block_size = 1024;       // context length T: positions of the position embedding; token windows are T + 1 tokens
  int64_t vocab_size = 50257;      // token ids in [0, vocab_size); every token of the data must be below it
  bool bias = true;                // biases in the linear layers and LayerNorms (nanoGPT's bias flag)
};

// Whether the model takes token ids (a language model: the gpt2 preset), so that data.dataset =
// "synthetic" makes token windows of model.block_size + 1 tokens for it instead of images. A
// [[layer]] list is given images.
inline bool model_takes_tokens(const ModelConfig& m) { return m.preset == PresetKind::Gpt2; }

struct TrainConfig {
  int64_t epochs = 1;
  int64_t steps = 0;               // > 0: stop after this many steps (overrides epochs)
  int64_t batch_size = 128;        // per rank
  optim::OptimizerKind optimizer = optim::OptimizerKind::AdamW;
  double lr = 1e-3;
  double momentum = 0.9;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  optim::DecayParams decay_params = optim::DecayParams::All;  // which parameters weight decay applies to
  double grad_clip = 0.0;          // > 0: clip gradients to this global L2 norm (0 = off)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  optim::ScheduleKind schedule = optim::ScheduleKind::Constant;
  int64_t warmup_steps = 0;
  double warmup_start_factor = 0.0;
  int64_t step_size = 1000;
  double gamma = 0.1;
  double min_lr = 0.0;
  double label_smoothing = 0.0;
  int64_t eval_every = 0;          // steps; 0 = at the end of each epoch
  int64_t log_every = 50;          // steps between progress lines
  cuda::DeviceRequest device = cuda::DeviceRequest::Auto;
  Precision precision = Precision::Fp32;
  int64_t threads = 0;             // CPU threads (0 = all cores)
  CpuBackend cpu_backend = CpuBackend::OneDnn;  // the CPU's kernels (runtime/cpu_backend.h)
  CpuConvAlgorithm cpu_conv_algorithm = CpuConvAlgorithm::Auto;  // oneDNN's convolutions (same file)
  CpuGemm cpu_gemm = CpuGemm::Auto;  // the linear layers' GEMM library under the oneDNN backend (same file)
  int64_t accum_steps = 1;         // micro-batches per optimizer step (gradients reduced once per step)
  int64_t zero = 0;                // ZeRO stage: 0 = DDP, 1 = optimizer state sharded over the ranks
  ElasticBatch elastic_batch = ElasticBatch::Global;  // a resume at another world size keeps (launch/elastic_batch.h)
  int64_t workspace_mb = 256;      // GPU: most scratch memory one cuDNN / cuBLASLt call may use
  cuda::CudnnApi cudnn_api = cuda::CudnnApi::Legacy;  // GPU: the convolutions' cuDNN API (runtime/cuda/cudnn_api.h)
  Tf32 tf32 = Tf32::Off;           // GPU, f32 data: TF32 tensor cores in convolutions / matmuls
  BnImpl bn_impl = BnImpl::Cudnn;  // GPU: batch norm's implementation (runtime/bn_impl.h)
  bool gpu_fusion = false;         // GPU: ReLUs (and residual adds) folded into batch norms and graph-API convolutions
  bool gpu_step_arena = false;     // GPU: outputs and input gradients in one arena by the memory plan's lifetimes
  double loss_scale_init = 65536;  // fp16: initial dynamic loss scale
  int64_t loss_scale_growth_interval = 2000;  // fp16: clean steps before the scale doubles
};

struct CheckpointConfig {
  bool final = true;               // write <run>/final.safetensors at the end
  int64_t every_steps = 0;         // checkpoint every N steps (0 = only at the end)
  int64_t keep = 3;                // keep the newest K checkpoints (0 = keep all)
  bool resume = true;              // resume from the run directory's newest checkpoint
  bool replicas = false;           // every rank writes replicas/replica-rank<r>.safetensors
  bool async = false;              // write checkpoints from a background thread (launch/checkpoint_saver.h)
  double every_s = 0;              // also checkpoint when this many seconds passed since the last one (0 = off)
};

struct DistConfig {
  std::string bootstrap = "auto";  // auto | pmix | pmi2 | env | slurm | single | file:///shared/dir
  CollectiveBackend backend = CollectiveBackend::Ring;
  double timeout_s = 300;          // bootstrap waits and every collective
  double bucket_mb = 25;           // gradient bucket size after the first
  double first_bucket_mb = 1;      // the first bucket (starts communication early)
  bool overlap = true;             // reduce buckets during backward (false: after it)
  bool allow_unused = false;       // a parameter without a gradient in a step is not an error
  GradCompress compress = GradCompress::None;  // gradients travel in 16 bits
  double straggler_ms = 50;        // the straggler report names a rank arriving later than this
  bool broadcast_buffers = true;   // rank 0's buffers replace the others' after every step (DDP's default)
  std::string iface;               // network interface the store and ring listeners bind ("" = by address)
};

struct ProfileConfig {
  std::string steps;               // "A-B": cudaProfilerStart/Stop around steps A..B (nsys capture range)
  std::string trace_steps;         // "A-B": write <run>/trace.json (Chrome trace) for steps A..B ("" = off)
  std::string layers;              // "A-B": per-layer times of steps A..B into <run>/layers.json and the log ("" = off)
};

struct Config {
  DistConfig dist;
  RunConfig run;
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  CheckpointConfig checkpoint;
  ProfileConfig profile;
  std::string source;              // the cfg path ("" when built in code)
  std::vector<std::string> given;  // "section.key" of every key the file or --set gave
};

// Reads `path` (TOML), applies overrides ("section.key=value", TOML value syntax, bare words
// as strings) and validates. Throws UserError with file:line.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Same, from a string (for tests); `name` is used in messages.
Config parse_config(const std::string& text, const std::string& name, const std::vector<std::string>& overrides = {});
// The resolved config as TOML: every key with its value, then the [[layer]] list.
std::string to_toml(const Config& c);
// Markdown reference of every key (generated from the schema).
std::string config_reference();

}  // namespace dp
