#include "launch/cli.h"

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "launch/check_config.h"
#include "launch/config_args.h"
#include "launch/inference.h"
#include "launch/local_launcher.h"
#include "launch/memory_command.h"
#include "launch/restart_record.h"
#include "launch/run_dir.h"
#include "launch/sample.h"
#include "launch/slurm_restart.h"
#include "launch/submit.h"
#include "launch/train_session.h"
#include "models/build.h"
#include "models/registry.h"
#include "runtime/config.h"
#include "runtime/data/byte_shards.h"
#include "runtime/device_error.h"
#include "runtime/log.h"
#include "runtime/suggest.h"
#include "runtime/tunables.h"

namespace dp::launch {

namespace {
// The options of a training run, shared by `dptrain model.cfg` and `dptrain submit model.cfg`.
struct RunArgs {
  std::string cfg_path;
  std::vector<std::string> sets;  // --set section.key=value, in order
  std::string name, run_dir, log_level;
  bool dump_replicas = false;
};

void add_run_options(CLI::App& app, RunArgs& a) {
  add_config_options(app, a.cfg_path, a.sets, "model.cfg (TOML), e.g. models/fmnist_cnn.cfg");
  app.add_option("--name", a.name, "run name (run.name): the run directory is <run.dir>/<name>");
  app.add_option("--run-dir", a.run_dir, "root folder of run directories (run.dir)");
  app.add_option("--log-level", a.log_level, "trace, debug, info, warn, error or off (run.log_level)");
  app.add_flag("--dump-replicas", a.dump_replicas,
               "every rank also writes its replica at each checkpoint (checkpoint.replicas = true; compare them "
               "with diffckpt --all)");
}

// The cfg overrides the options stand for: --set first, then the dedicated options (which win).
std::vector<std::string> overrides_of(const RunArgs& a) {
  std::vector<std::string> o = a.sets;
  if (!a.name.empty()) o.push_back("run.name=\"" + a.name + "\"");
  if (!a.run_dir.empty()) o.push_back("run.dir=\"" + a.run_dir + "\"");
  if (!a.log_level.empty()) o.push_back("run.log_level=\"" + a.log_level + "\"");
  if (a.dump_replicas) o.push_back("checkpoint.replicas=true");
  return o;
}

// An error that ends a run: the rank's log file has it too, with the time it happened.
int logged_failure(const std::exception& e, int status) {
  log::get("train")->error("{}", e.what());
  log::get("train")->flush();
  std::fprintf(stderr, "dptrain: error: %s\n", e.what());
  return status;
}

// Runs a command; an error becomes one "dptrain: error:" line and exit code 2 (the user's
// input), 3 (a peer or the network failed: collectives/communicator.h's CommunicationError), 4
// (the GPU ran out of memory: runtime/device_error.h's DeviceOutOfMemory) or 1 (anything else).
// 3 and 4 also go to the rank's log file.
template <typename F>
int reporting_errors(F&& command) {
  try {
    return command();
  } catch (const UserError& e) {
    std::fprintf(stderr, "dptrain: error: %s\n", e.what());
    return kExitUserError;
  } catch (const CommunicationError& e) {
    return logged_failure(e, kExitCommunicationFailed);
  } catch (const DeviceOutOfMemory& e) {
    return logged_failure(e, kExitDeviceOutOfMemory);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dptrain: error: %s\n", e.what());
    return 1;
  }
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) DP_THROW_USER("cannot find the dptrain binary (/proc/self/exe): {}", ec.message());
  return p.string();
}

// The snapshot's path in run_path: a name of its own per submission (a queued job keeps its file).
std::string free_snapshot_path(const std::string& run_path, std::time_t now) {
  for (int attempt = 1;; ++attempt) {
    const std::string p = run_path + "/" + snapshot_name(now, attempt);
    if (!std::filesystem::exists(p)) return p;
  }
}

// dptrain submit: resolve the cfg here (so its errors show now, not in the job), snapshot it into
// the run directory, write the script that runs the snapshot and hand it to sbatch, or print it.
int submit(const RunArgs& a, const SlurmOptions& slurm, bool dry_run) {
  if (a.cfg_path.empty()) {
    std::fprintf(stderr, "dptrain: error: no config given; try: dptrain submit --nodes 2 --gpus-per-node 4 "
                         "models/fmnist_cnn.cfg (see dptrain submit --help)\n");
    return 2;
  }
  Config cfg = load_config(a.cfg_path, overrides_of(a));
  models::validate_model(cfg.model);
  log::parse_levels(cfg.run.log_levels);  // fail at the prompt, not in the queue
  check_tunables();                       // (sbatch hands the job this environment)
  namespace fs = std::filesystem;
  cfg.run.dir = fs::absolute(cfg.run.dir).lexically_normal().string();
  const std::string run_path = cfg.run.dir + "/" + cfg.run.name;
  const std::string snapshot = free_snapshot_path(run_path, std::time(nullptr));
  // Never --reset: a requeued job must resume, not start over. --run-dir and --name repeat what
  // the snapshot says, for whoever reads the script.
  SbatchJob job{.slurm = slurm, .job_name = cfg.run.name, .workdir = fs::current_path().string(),
                .run_path = run_path, .dptrain = self_exe(),
                .args = {snapshot, "--run-dir", cfg.run.dir, "--name", cfg.run.name}};
  const std::string script = sbatch_script(job);
  if (const std::string w = finished_run_warning(run_path); !w.empty())
    std::fprintf(stderr, "dptrain submit: warning: %s\n", w.c_str());
  if (dry_run) {
    std::fputs(script.c_str(), stdout);
    // Slurm opens the job's output files before the script runs: their folder must exist.
    std::fprintf(stderr, "dptrain submit: dry run, nothing written; without --dry-run, submit writes the script, "
                         "%s/logs and the cfg snapshot %s the script runs\n",
                 run_path.c_str(), snapshot.c_str());
    return 0;
  }
  RunDir run(cfg.run.dir, cfg.run.name);
  run.write_text(fs::path(snapshot).filename().string(), snapshot_text(to_toml(cfg), a.cfg_path));
  run.write_text("submit.sbatch", script);
  const std::string path = run.file("submit.sbatch");
  const std::string id = submit_sbatch(path);
  std::printf("dptrain: submitted batch job %s (script %s, running the cfg snapshot %s; task output "
              "%s/logs/slurm-%s-<task>.out)\n",
              id.c_str(), path.c_str(), snapshot.c_str(), run.path().c_str(), id.c_str());
  return 0;
}
// `dptrain submit`'s options.
CLI::App* add_submit_command(CLI::App& app, RunArgs& sub_args, SlurmOptions& slurm, bool& dry_run) {
  CLI::App* sub = app.add_subcommand(
      "submit", "write an sbatch script for model.cfg into the run directory (<run.dir>/<run.name>/submit.sbatch) and "
                "submit it with sbatch: one task per GPU, srun --mpi=pmix, requeued on preemption "
                "(SIGUSR1 90 s before the time limit)");
  add_run_options(*sub, sub_args);
  sub->add_option("--nodes", slurm.nodes, "nodes (default 1)")->check(CLI::Range(1, 100000));
  sub->add_option("--gpus-per-node", slurm.gpus_per_node,
                  "GPUs per node, one task each (--gres=gpu:G); 0 (default): CPU nodes")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--ntasks-per-node", slurm.ntasks_per_node,
                  "tasks per node (default: --gpus-per-node, or 1 on CPU nodes)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--cpus-per-task", slurm.cpus_per_task, "CPU cores per task (default: Slurm's)")
      ->check(CLI::Range(1, 100000));
  sub->add_option("--mem", slurm.mem, "memory per node, e.g. 64G (default: Slurm's)");
  sub->add_option("--partition", slurm.partition, "Slurm partition");
  sub->add_option("--time", slurm.time, "time limit, e.g. 04:00:00 or 2-00:00:00 (the job requeues itself at the end)");
  sub->add_option("--account", slurm.account, "account to charge");
  sub->add_option("--qos", slurm.qos, "quality of service");
  sub->add_option("--nodelist", slurm.nodelist, "nodes to run on, e.g. node[01-04]");
  sub->add_option("--max-restarts", slurm.max_restarts,
                  "run the srun step again when it fails (any status but 2, a cfg or input error, or a cancelled "
                  "job), up to K times, from the newest checkpoint (default 0)")
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--min-nodes", slurm.min_nodes,
                  "with --max-restarts: go on with fewer nodes (down to M) when a node fails: Slurm's --no-kill, "
                  "each restart on the nodes still up, the checkpoint remapped (train.elastic_batch)")
      ->check(CLI::Range(1, 100000));
  sub->add_flag("--dry-run", dry_run, "print the script instead of writing and submitting it");

  return sub;
}

// `dptrain eval` and `dptrain predict`: the cfg, the weights, and what to read and write.
struct InferArgs {
  std::string cfg_path;
  std::vector<std::string> sets;
  std::string log_level;
  InferenceOptions o;
};

CLI::App* add_inference_command(CLI::App& app, InferArgs& a, bool predict) {
  CLI::App* c = app.add_subcommand(
      predict ? "predict" : "eval",
      predict ? "the top-k classes and probabilities of every sample of --input, in input order, as JSON lines in --out "
                "(data-parallel with --nproc or srun)"
              : "evaluate --weights on the cfg's evaluation split: loss, top-1, top-5, the same on any number of "
                "ranks (--nproc or srun)");
  c->fallthrough();  // --nproc after the command's name
  add_config_options(*c, a.cfg_path, a.sets, "model.cfg (TOML): the model the weights are of, and the data and batch size");
  c->add_option("--log-level", a.log_level, "trace, debug, info, warn, error or off (run.log_level)");
  c->add_option("--weights", a.o.weights,
                "a dptrain final.safetensors or checkpoint, or a safetensors state_dict (torchvision names)")
      ->required();
  if (predict) {
    c->add_option("--input", a.o.input, "an IDX image file or a CIFAR-10 binary file")->required();
    c->add_option("--out", a.o.out, "the predictions, one JSON line per sample (written whole or not at all)")
        ->required();
    c->add_option("--topk", a.o.topk, "classes per sample (default 5)")->check(CLI::Range(1, 1000000));
  } else {
    c->add_option("--out", a.o.out, "also write the metrics as one JSON line to this file");
  }
  return c;
}

// eval or predict: the cfg checked here (in the launcher too, before any worker starts).
int inference(InferArgs a, bool predict, int nproc, bool launcher, int argc, char** argv) {
  RunArgs r{.cfg_path = a.cfg_path, .sets = a.sets};
  take_config_from_sets(r.cfg_path, r.sets);
  if (r.cfg_path.empty()) {
    std::fprintf(stderr, "dptrain: error: no config given; try: dptrain %s models/fmnist_cnn.cfg --weights "
                         "runs/fmnist_cnn/final.safetensors%s (see dptrain %s --help)\n",
                 predict ? "predict" : "eval",
                 predict ? " --input /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz --out preds.jsonl" : "",
                 predict ? "predict" : "eval");
    return 2;
  }
  if (!a.log_level.empty()) r.sets.push_back("run.log_level=\"" + a.log_level + "\"");
  const Config cfg = load_config(r.cfg_path, r.sets);
  models::validate_model(cfg.model);
  if (!std::filesystem::exists(a.o.weights))
    DP_THROW_USER("--weights {}: no such file (give a final.safetensors, a checkpoint or a safetensors state_dict)",
                  a.o.weights);
  if (launcher) {
    check_tunables();
    return run_local(nproc, worker_args_of(argc, argv));
  }
  log::configure(cfg.run.log_level, "", false, cfg.run.log_levels);
  tunables();
  return predict ? run_predict(cfg, a.o) : run_eval(cfg, a.o);
}

// `dptrain sample`: the cfg, the weights, the prompt and how to draw.
struct SampleArgs {
  std::string cfg_path;
  std::vector<std::string> sets;
  std::string log_level;
  SampleOptions o;
};

CLI::App* add_sample_command(CLI::App& app, SampleArgs& a) {
  CLI::App* c = app.add_subcommand(
      "sample", "continue a prompt with a GPT model (model.preset = \"gpt2\") and --weights: text for a byte-level "
                "model (vocab_size 256), token ids otherwise; the same output for the same --seed");
  add_config_options(*c, a.cfg_path, a.sets, "model.cfg (TOML): the model the weights are of");
  c->add_option("--log-level", a.log_level, "trace, debug, info, warn, error or off (default warn: stdout is the text)");
  c->add_option("--weights", a.o.weights,
                "a dptrain final.safetensors or checkpoint, a nanoGPT state_dict or a Hugging Face GPT-2 checkpoint")
      ->required();
  c->add_option("--prompt", a.o.prompt, "the text to continue (a byte-level model)");
  c->add_option("--prompt-ids", a.o.prompt_ids, "the token ids to continue, e.g. \"15496, 11, 995\"");
  c->add_option("--tokens", a.o.tokens, "new tokens per sample (default 200)")->check(CLI::Range(0, 100000000));
  c->add_option("--temperature", a.o.temperature, "divide the logits by this (default 1; 0: the most likely token)")
      ->check(CLI::Range(0.0, 1e6));
  c->add_option("--top-k", a.o.top_k, "draw among the k most likely tokens (default 0: all)")
      ->check(CLI::Range(0, 100000000));
  c->add_option("--samples", a.o.samples, "continuations, drawn side by side (default 1)")->check(CLI::Range(1, 4096));
  c->add_option("--seed", a.o.seed, "the draws' seed (default 0)");
  return c;
}

int sample(SampleArgs a) {
  RunArgs r{.cfg_path = a.cfg_path, .sets = a.sets};
  take_config_from_sets(r.cfg_path, r.sets);
  if (r.cfg_path.empty()) {
    std::fprintf(stderr, "dptrain: error: no config given; try: dptrain sample models/gpt_tiny.cfg --weights "
                         "runs/gpt_tiny/final.safetensors --prompt \"ROMEO:\" (see dptrain sample --help)\n");
    return 2;
  }
  r.sets.push_back("run.log_level=\"" + (a.log_level.empty() ? std::string("warn") : a.log_level) + "\"");
  const Config cfg = load_config(r.cfg_path, r.sets);
  models::validate_model(cfg.model);
  if (!std::filesystem::exists(a.o.weights))
    DP_THROW_USER("--weights {}: no such file (give a final.safetensors, a checkpoint or a safetensors state_dict)",
                  a.o.weights);
  log::configure(cfg.run.log_level, "", false, cfg.run.log_levels);
  tunables();
  return run_sample(cfg, a.o);
}

// --print-config-reference: docs/config-reference.md is exactly this output (a test compares them).
int print_config_reference() {
  std::fputs("# dptrain config reference\n\nEvery key of `model.cfg`, generated from the typed config schema "
             "(`runtime/config.cpp`) by `dptrain --print-config-reference`; do not edit by hand. A key is "
             "`section.key`; override any of them with `--set section.key=value`.\n",
             stdout);
  std::fputs(config_reference().c_str(), stdout);
  std::fputs(tunables_reference().c_str(), stdout);
  return 0;
}

// --list-layers: each layer type with its keys, then the presets.
int print_layer_list() {
  const auto& reg = models::layer_registry();
  for (const auto& t : reg.types()) {
    std::vector<std::string> keys;
    for (const auto& a : reg.arg_specs(t)) keys.push_back(a.name + (a.default_value ? "" : " (required)"));
    std::printf("%-16s %s\n", t.c_str(), join(keys).c_str());
  }
  std::printf("presets: %s\n", join(enum_name_list<PresetKind>()).c_str());
  return 0;
}

// `dptrain make-shards INPUT --out DIR`: byte-level token shards of any file (runtime/data/byte_shards.h).
struct MakeShardsArgs {
  std::string input, out;
  data::ByteShardsOptions o;
};

CLI::App* add_make_shards_command(CLI::App& app, MakeShardsArgs& a) {
  CLI::App* c = app.add_subcommand(
      "make-shards", "write byte-level token shards (llm.c's format, vocabulary 256: each byte one token) of any file "
                     "into --out as train_NNNNNN.bin and val_NNNNNN.bin, to train a language model without a tokenizer");
  c->add_option("input", a.input, "any file, e.g. a text")->required();
  c->add_option("--out", a.out, "the folder of the shards (created)")->required();
  c->add_option("--val-fraction", a.o.val_fraction, "the share of the bytes (at the end of the file) that evaluate "
                "(default 0.1)");
  c->add_option("--shard-tokens", a.o.shard_tokens, "tokens per shard at most (default 100000000, as llm.c)");
  return c;
}

int make_shards(const MakeShardsArgs& a) {
  const data::ByteShards r = data::make_byte_shards(a.input, a.out, a.o);
  std::printf("%s: %lld training tokens in %zu shard(s) (%s ...), %lld evaluation tokens in %zu shard(s) (%s ...); "
              "vocabulary 256 (bytes)\ntrain on them with: [data] dataset = \"tokens\", path = \"%s/train_*.bin\", "
              "val_path = \"%s/val_*.bin\"; [model] vocab_size = 256\n",
              a.input.c_str(), static_cast<long long>(r.train_tokens), r.train.size(), r.train.front().c_str(),
              static_cast<long long>(r.val_tokens), r.val.size(), r.val.front().c_str(), a.out.c_str(), a.out.c_str());
  return 0;
}

// One rank's training run and its exit status. Stopped by a signal after a checkpoint: SIGUSR1
// (checkpoint, requeue) is a planned stop, exit 0; SIGTERM/SIGINT exit as a signalled program
// does (128 + signal), so a scheduler or script sees the run did not finish.
int run_training(const Config& cfg, bool reset) {
  log::configure(cfg.run.log_level, "", false, cfg.run.log_levels);
  tunables();  // read (and checked) once, logged by the trainer
  const TrainResult r = train(cfg, TrainOptions{.reset = reset});
  if (r.stop_signal != 0 && r.stop_signal != SIGUSR1) return 128 + r.stop_signal;
  return 0;
}

// `dptrain --help`'s first lines.
constexpr const char* kUsage =
    "dptrain: data-parallel training of convolutional networks and GPT models, CPU or CUDA.\n"
    "  dptrain model.cfg                     train (one process; GPU if present, else CPU)\n"
    "  dptrain model.cfg --set train.lr=0.01 override any cfg key\n"
    "  dptrain --nproc 4 model.cfg           4 local processes (env bootstrap)\n"
    "  dptrain --nproc 4 --max-restarts 3 model.cfg   restart all 4 from the last checkpoint when one dies\n"
    "  srun --mpi=pmix dptrain model.cfg     one process per Slurm task\n"
    "  dptrain submit --nodes 2 --gpus-per-node 4 model.cfg   a Slurm batch job (dptrain submit --help)\n"
    "  dptrain eval model.cfg --weights W    evaluate weights (dptrain eval --help)\n"
    "  dptrain predict model.cfg --weights W --input X --out preds.jsonl   top-k per sample\n"
    "  dptrain sample model.cfg --weights W --prompt TEXT   continue a prompt with a GPT model\n"
    "  dptrain memory model.cfg [--json] [--max-batch]   the planned peak memory per rank (dptrain memory --help)\n"
    "  dptrain make-shards INPUT --out DIR   byte-level token shards of a file (language models)";

// Everything the command line fills: the training run's options and each command's.
struct CliArgs {
  RunArgs run;
  bool reference = false, list_layers = false, reset = false, check = false;
  int nproc = 1;
  int max_restarts = 0;
  RunArgs submit;
  SlurmOptions slurm;
  bool dry_run = false;
  SlurmRestart restart;  // dptrain record-restart (the --min-nodes script's)
  InferArgs eval, predict;
  SampleArgs sample;
  MakeShardsArgs shards;
  MemoryArgs memory;
};

// The commands, to ask which one was given.
struct Commands {
  CLI::App *submit, *eval, *predict, *sample, *shards, *restart;
  CLI::App* memory;
};

// `dptrain model.cfg`'s options (a training run, or one of the print-and-exit flags).
void add_main_options(CLI::App& app, CliArgs& a) {
  app.set_version_flag("--version", "dptrain 0.1.0");
  app.footer(tunables_help());
  add_run_options(app, a.run);
  app.add_option("--nproc", a.nproc, "launch N local worker processes (each line of their output prefixed '[rank r] ')")
      ->check(CLI::Range(1, 1024));
  app.add_option("--max-restarts", a.max_restarts,
                 "with --nproc: when a worker dies (a signal, or any exit status but 2, a cfg or input error), stop "
                 "the others and start all again from the run's newest checkpoint, up to K times (default 0); each "
                 "restart is a line here and in metrics.jsonl")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--print-config-reference", a.reference,
               "print every cfg key and environment tunable (Markdown) and exit");
  app.add_flag("--list-layers", a.list_layers, "print the layer types and their keys, and the presets, and exit");
  app.add_flag("--reset", a.reset,
               "start over: delete the run directory's checkpoints instead of resuming from them (the earlier run's "
               "metrics, event files and final weights move into <run>/before-reset-<time>/)");
  app.add_flag("--check", a.check,
               "check model.cfg and its data files, print the resolved model (parameters, shapes) and exit; writes "
               "nothing");
}

Commands add_commands(CLI::App& app, CliArgs& a) {
  Commands c{};
  c.submit = add_submit_command(app, a.submit, a.slurm, a.dry_run);
  c.eval = add_inference_command(app, a.eval, false);
  c.predict = add_inference_command(app, a.predict, true);
  c.sample = add_sample_command(app, a.sample);
  c.shards = add_make_shards_command(app, a.shards);
  c.memory = add_memory_command(app, a.memory);
  c.restart = add_record_restart_command(app, a.restart);
  return c;
}

// --nproc N (or --max-restarts K, with one worker too): this process launches N workers (our
// arguments minus --nproc and --max-restarts) and supervises them, after checking once what can be
// checked (the cfg). The launcher's variables in our environment mean we are a worker already.
bool is_launcher(int nproc, int max_restarts) {
  const bool launcher = (nproc > 1 || max_restarts > 0) && std::getenv("RANK") == nullptr;
  if (nproc > 1 && !launcher)
    std::fprintf(stderr, "dptrain: --nproc %d ignored: this process is a worker already (RANK is set)\n", nproc);
  return launcher;
}

// `dptrain model.cfg` and its print-and-exit flags: print, check, launch the workers or train.
int run_main_command(const CliArgs& a, bool launcher, int argc, char** argv) {
  if (launcher && (a.reference || a.list_layers)) return run_local(a.nproc, worker_args_of(argc, argv));
  if (a.reference) return print_config_reference();
  if (a.list_layers) return print_layer_list();
  if (a.run.cfg_path.empty()) {
    std::fprintf(stderr, "dptrain: error: no config given; try: dptrain models/fmnist_cnn.cfg (see --help)\n");
    return 2;
  }
  Config cfg = load_config(a.run.cfg_path, overrides_of(a.run));
  models::validate_model(cfg.model);
  if (a.check) {
    log::configure("warn", "", false, cfg.run.log_levels);  // the summary is the output
    return check_config(cfg, a.run.cfg_path);
  }
  // The environment's tunables: a bad one is refused here, before any rank waits for another.
  // The launcher only checks them (its workers read their own).
  if (launcher) {
    check_tunables();
    LocalLaunchOptions o;
    o.max_restarts = a.max_restarts;
    o.on_restart = [dir = cfg.run.dir, name = cfg.run.name](const RestartEvent& e) {
      return record_restart(dir, name, e);
    };
    return run_local(a.nproc, worker_args_of(argc, argv), o);
  }
  return run_training(cfg, a.reset);
}

// The command given, each with its errors reported (reporting_errors).
int dispatch(const Commands& c, const CliArgs& a, int argc, char** argv) {
  if (c.submit->parsed()) return reporting_errors([&] { return submit(a.submit, a.slurm, a.dry_run); });
  if (c.shards->parsed()) return reporting_errors([&] { return make_shards(a.shards); });
  if (c.memory->parsed()) return reporting_errors([&] { return memory_command(a.memory); });
  if (c.restart->parsed()) return reporting_errors([&] { return record_slurm_restart(a.restart); });
  const bool launcher = is_launcher(a.nproc, a.max_restarts);
  if (c.sample->parsed()) return reporting_errors([&] { return sample(a.sample); });
  if (c.eval->parsed() || c.predict->parsed()) {
    const bool p = c.predict->parsed();
    return reporting_errors([&] { return inference(p ? a.predict : a.eval, p, a.nproc, launcher, argc, argv); });
  }
  return reporting_errors([&] { return run_main_command(a, launcher, argc, argv); });
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{kUsage};
  CliArgs a;
  add_main_options(app, a);
  const Commands commands = add_commands(app, a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  take_config_from_sets(a.run.cfg_path, a.run.sets);
  take_config_from_sets(a.submit.cfg_path, a.submit.sets);
  return dispatch(commands, a, argc, argv);
}

}  // namespace dp::launch
