// The dptrain command line: a malformed cfg is one exact error line on stderr and exit code 2,
// before any run directory is created; --help lists every option; docs/config-reference.md is
// the binary's --print-config-reference; `dptrain submit` writes, submits or prints the script.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launch/cli.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/config.h"
#include "runtime/tunables.h"
#include "tests/bytes.h"
#include "tests/scoped_env.h"

namespace dp::launch {
namespace {

using testutil::ScopedEnv;

struct CliResult {
  int code;
  std::string err;
  std::string out;
};

CliResult run(std::vector<std::string> args) {
  std::vector<char*> argv;
  args.insert(args.begin(), "dptrain");
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  int code = run_cli(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  std::string out = testing::internal::GetCapturedStdout();
  return {code, testing::internal::GetCapturedStderr(), out};
}

class Cli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dptrain_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& text) {
    std::string p = (dir_ / "m.cfg").string();
    std::ofstream(p) << text;
    return p;
  }
  std::filesystem::path dir_;
};

TEST_F(Cli, UnknownLayerTypeListsKnownTypes) {
  std::string p = write("[run]\ndir = \"" + dir_.string() + "/runs\"\n\n[[layer]]\ntype = \"flatten\"\n\n[[layer]]\n"
                        "type = \"linaer\"\nname = \"fc\"\nout_features = 10\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p +
                       ":7: layer 'fc': unknown layer type 'linaer' (did you mean 'linear'?); known types: add, "
                       "avgpool2d, batchnorm2d, causal_self_attention, conv2d, dropout, embedding, flatten, gelu, "
                       "global_avgpool, layernorm, linear, maxpool2d, position_embedding, relu\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs")) << "a bad cfg must not create a run directory";
}

TEST_F(Cli, MissingRequiredLayerKey) {
  std::string p = write("[[layer]]\ntype = \"flatten\"\n\n[[layer]]\ntype = \"linear\"\nname = \"fc\"\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p + ":4: layer 'fc' (linear): missing required key 'out_features' (an integer)\n");
}

TEST_F(Cli, UnknownLayerKeySuggestsClosest) {
  std::string p = write("[[layer]]\ntype = \"conv2d\"\nname = \"c\"\nout_channels = 4\nkernal = 3\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p +
                       ":5: layer 'c' (conv2d): unknown key 'kernal' (did you mean 'kernel'?); valid keys: "
                       "out_channels, kernel, stride, padding, groups, bias, init\n");
}

TEST_F(Cli, LayerValueOutOfRange) {
  std::string p = write("[[layer]]\ntype = \"dropout\"\nname = \"d\"\np = 1.5\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p + ":4: layer 'd' (dropout): key 'p' = 1.5 is out of range [0, 0.999999]\n");
}

TEST_F(Cli, LayerInputMustExist) {
  std::string p = write("[[layer]]\ntype = \"flatten\"\n\n[[layer]]\ntype = \"add\"\nname = \"a\"\n"
                        "inputs = [\"flatten1\", \"nope\"]\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p +
                       ":4: layer 'a' takes input 'nope', which is not an earlier layer (layers must be listed after "
                       "their inputs; 'input' is the model input)\n");
}

// Step windows are checked before the run directory exists.
TEST_F(Cli, BadProfileWindowsAreErrorsBeforeAnyRunDirectory) {
  for (const std::string key : {"steps", "trace_steps", "layers"}) {
    std::string p = write("[run]\ndir = \"" + dir_.string() + "/runs\"\nlog_level = \"warn\"\n[model]\npreset = "
                          "\"mlp\"\n[profile]\n" + key + " = \"9-3\"\n");
    auto r = run({p});
    EXPECT_EQ(r.code, 2) << key;
    EXPECT_NE(r.err.find("dptrain: error: profile." + key +
                         " = \"9-3\": expected \"A-B\" with whole steps 1 <= A <= B (e.g. \"100-110\"), or \"\" for off"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "runs")) << key;
  }
}

// The cfg after the options: `--set` takes values up to the next option but leaves the config.
TEST_F(Cli, ConfigAfterSetIsTheConfig) {
  std::string p = write("[model]\npreset = \"mlp\"\n[train]\nlrr = 1\n");
  auto r = run({"--set", "train.lr=0.5", p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p +
                       ":4: unknown key 'train.lrr' (did you mean 'train.lr'?); valid keys in [train]: epochs, steps, "
                       "batch_size, optimizer, lr, momentum, dampening, nesterov, weight_decay, decay_params, grad_clip, "
                       "beta1, beta2, eps, "
                       "schedule, warmup_steps, warmup_start_factor, step_size, gamma, min_lr, label_smoothing, "
                       "eval_every, log_every, device, precision, threads, cpu_backend, cpu_conv_algorithm, cpu_gemm, accum_steps, zero, elastic_batch, workspace_mb, cudnn_api, tf32, bn_impl, gpu_fusion, gpu_step_arena, loss_scale_init, "
                       "loss_scale_growth_interval\n");
  std::string good = write("[model]\npreset = \"mlp\"\n");
  r = run({"--set", "data.hflip=true", "train.lrr=0.5", good, "--log-level", "warn"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: --set train.lrr=0.5: unknown key 'train.lrr' (did you mean 'train.lr'?)\n");
  r = run({"submit", "--dry-run", "--set", "train.lrr=0.5", good});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: --set train.lrr=0.5: unknown key 'train.lrr' (did you mean 'train.lr'?)\n");
}

TEST_F(Cli, MissingConfigFile) {
  auto r = run({"/nonexistent.cfg"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: cannot read config file '/nonexistent.cfg': No such file or directory (give the "
                   "path of a model.cfg, e.g. models/fmnist_cnn.cfg)\n");
}

TEST_F(Cli, UnknownPresetSuggests) {
  std::string p = write("[model]\npreset = \"resnet19\"\n");
  auto r = run({p});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: " + p +
                       ":2: model.preset = \"resnet19\" is not allowed (did you mean \"resnet18\"?); use one of: mlp, "
                       "cnn, resnet18, resnet50, cifar_resnet18, gpt2\n");
}

TEST_F(Cli, HelpListsEveryOptionAndTheSubmitCommand) {
  auto r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* opt : {"--set", "--name", "--run-dir", "--log-level", "--dump-replicas", "--nproc",
                          "--print-config-reference", "--list-layers", "--reset", "--version", "--help", "submit",
                          "make-shards"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt << " missing from --help:\n" << r.out;
  for (const auto& s : tunable_specs())  // and every environment tunable
    EXPECT_NE(r.out.find("  " + std::string(s.name) + " "), std::string::npos) << s.name << " missing from --help";
  r = run({"submit", "--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* opt : {"--nodes", "--gpus-per-node", "--ntasks-per-node", "--cpus-per-task", "--mem", "--partition",
                          "--time", "--account", "--qos", "--nodelist", "--dry-run", "--set", "--name", "--run-dir",
                          "--log-level", "--dump-replicas"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt << " missing from submit --help:\n" << r.out;
}

// dptrain make-shards: byte-level shards of a file, a summary line saying how to train on them;
// a bad input is one error line, exit 2.
TEST_F(Cli, MakeShardsWritesByteShardsAndSaysHowToUseThem) {
  const std::string in = (dir_ / "text.txt").string(), out = (dir_ / "shards").string();
  std::ofstream(in) << std::string(1000, 'a') + std::string(100, 'b');
  auto r = run({"make-shards", in, "--out", out, "--val-fraction", "0.1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, in + ": 990 training tokens in 1 shard(s) (" + out + "/train_000000.bin ...), 110 evaluation "
                   "tokens in 1 shard(s) (" + out + "/val_000000.bin ...); vocabulary 256 (bytes)\ntrain on them with: "
                   "[data] dataset = \"tokens\", path = \"" + out + "/train_*.bin\", val_path = \"" + out +
                   "/val_*.bin\"; [model] vocab_size = 256\n");
  EXPECT_EQ(std::filesystem::file_size(out + "/val_000000.bin"), 1024u + 2 * 110);
  r = run({"make-shards", in, "--out", out, "--val-fraction", "1.5"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: --val-fraction 1.5: the evaluation split's share of the bytes must be between 0 "
                   "and 1 (e.g. 0.1)\n");
  r = run({"make-shards", in});
  EXPECT_NE(r.code, 0);  // --out is required (CLI11's message)
}

// A bad DPTRAIN_* value stops dptrain with one error line, exit 2, before any run directory:
// in a single process and in the launcher of --nproc alike.
TEST_F(Cli, ABadTunableIsOneErrorBeforeAnyRunDirectory) {
  const std::string dptrain = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
  ASSERT_TRUE(std::filesystem::exists(dptrain)) << "build the dptrain target first";
  const std::string p = write("[run]\ndir = \"" + dir_.string() + "/runs\"\n[model]\npreset = \"mlp\"\n");
  const std::string err = (dir_ / "err.txt").string();
  for (const char* nproc : {"1", "2"}) {
    const std::string cmd = "env -u RANK DPTRAIN_RING_SPIN_US=fast " + dptrain + " --nproc " + nproc + " " + p +
                            " >/dev/null 2>" + err;
    const int st = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(st)) << cmd;
    EXPECT_EQ(WEXITSTATUS(st), 2) << cmd;
    EXPECT_EQ(test::file_bytes(err),
              "dptrain: error: environment variable DPTRAIN_RING_SPIN_US = \"fast\" is not allowed: expected a "
              "number in [0, 1000000]; unset it for the default (50)\n")
        << "--nproc " << nproc;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "runs")) << "--nproc " << nproc;
  }
}

TEST_F(Cli, ConfigReferenceDocIsTheBinarysOutput) {
  auto r = run({"--print-config-reference"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(test::file_bytes(std::string(DPTRAIN_SOURCE_DIR) + "/docs/config-reference.md"), r.out)
      << "docs/config-reference.md is out of date: regenerate it with "
         "build/dptrain --print-config-reference > docs/config-reference.md";
}

TEST_F(Cli, DumpReplicasWritesEveryRanksReplica) {
  std::string p = write("[run]\ndir = \"" + dir_.string() + "/runs\"\nlog_level = \"warn\"\n[data]\n"
                        "dataset = \"synthetic\"\nsynthetic_train = 64\nsynthetic_eval = 16\n"
                        "synthetic_shape = [1, 4, 4]\n[model]\npreset = \"mlp\"\nhidden = [8]\n"
                        "[train]\nsteps = 2\nbatch_size = 16\n");
  auto r = run({p, "--dump-replicas"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "runs/default/replicas/replica-rank0.safetensors"));
}

class SubmitCli : public Cli {
 protected:
  std::string cfg() { return write("[model]\npreset = \"mlp\"\n[train]\nsteps = 10\n"); }
  std::string runs() { return (dir_ / "runs").string(); }
  // The srun command's arguments after the binary, as the job will run them: the cfg snapshot
  // (its time stamp replaced by "<time>"), then the run directory and name.
  std::string job_args() { return runs() + "/try2/submit-<time>.cfg --run-dir " + runs() + " --name try2\n"; }
  // The script's last line from the snapshot's path on, its time stamp replaced by "<time>"; the
  // snapshot's path.
  static std::string last_line(const std::string& script, std::string* snapshot = nullptr) {
    const std::string l = script.substr(script.rfind('\n', script.size() - 2) + 1);
    const size_t at = l.find("/submit-");
    if (at == std::string::npos || l.size() < at + 8 + 15) return l;
    const size_t begin = l.rfind(' ', at) + 1;
    if (snapshot) *snapshot = l.substr(begin, l.find(' ', at) - begin);
    return l.substr(begin, at + 8 - begin) + "<time>" + l.substr(at + 8 + 15);
  }
  // The script with its snapshot's time stamp replaced.
  static std::string without_time(const std::string& script) {
    std::string s = script;
    const size_t at = s.rfind("/submit-");
    return at == std::string::npos ? s : s.replace(at + 8, 15, "<time>");
  }
};

TEST_F(SubmitCli, DryRunPrintsTheScriptAndWritesNothing) {
  const std::string p = cfg();
  auto r = run({"submit", "--dry-run", "--nodes", "2", "--gpus-per-node", "2", "--time", "01:00:00", p, "--run-dir",
                runs(), "--name", "try2", "--set", "train.lr=0.01", "--dump-replicas"});
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string run_path = runs() + "/try2";
  // Slurm opens the output files before the script runs: the note says to create their folder.
  std::string snapshot;
  EXPECT_EQ(last_line(r.out, &snapshot), job_args()) << r.out;
  EXPECT_EQ(r.err, "dptrain submit: dry run, nothing written; without --dry-run, submit writes the script, " + run_path +
                       "/logs and the cfg snapshot " + snapshot + " the script runs\n");
  for (const std::string& line : std::vector<std::string>{
           "#SBATCH --job-name=try2\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=2\n", "#SBATCH --gres=gpu:2\n",
        "#SBATCH --time=01:00:00\n", "#SBATCH --chdir=" + std::filesystem::current_path().string() + "\n",
        "#SBATCH --output=" + run_path + "/logs/slurm-%j.out\n", "#SBATCH --signal=USR1@90\n", "#SBATCH --requeue\n",
        "  --output=" + run_path + "/logs/slurm-%j-%t.out \\\n"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " not in:\n" << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs")) << "--dry-run must not create the run directory";
}

TEST_F(SubmitCli, WritesTheScriptAndRunsSbatch) {
  const std::string p = cfg();
  std::filesystem::create_directories(dir_ / "bin");
  const auto sbatch = dir_ / "bin/sbatch";
  std::ofstream(sbatch) << "#!/bin/sh\necho \"$@\" > " << (dir_ / "sbatch.args").string() << "\necho 4242\n";
  std::filesystem::permissions(sbatch, std::filesystem::perms::owner_all);
  const std::string dry = run({"submit", "--dry-run", p, "--run-dir", runs(), "--name", "try2", "--set",
                               "train.lr=0.01", "--dump-replicas"}).out;
  ScopedEnv path("PATH", (dir_ / "bin").string() + ":/usr/bin:/bin");
  auto r = run({"submit", p, "--run-dir", runs(), "--name", "try2", "--set", "train.lr=0.01", "--dump-replicas"});
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string script = runs() + "/try2/submit.sbatch";
  std::string snapshot;
  EXPECT_EQ(last_line(test::file_bytes(script), &snapshot), job_args());
  EXPECT_EQ(r.out, "dptrain: submitted batch job 4242 (script " + script + ", running the cfg snapshot " + snapshot +
                       "; task output " + runs() + "/try2/logs/slurm-4242-<task>.out)\n");
  EXPECT_EQ(test::file_bytes(dir_ / "sbatch.args"), "--parsable " + script + "\n");
  // The dry run printed the same script (up to the snapshot's time stamp).
  EXPECT_EQ(without_time(test::file_bytes(script)), without_time(dry));
  EXPECT_TRUE(std::filesystem::is_directory(runs() + "/try2/logs"));

  // The job runs the snapshot: the resolved cfg with every --set, whatever happens to m.cfg now.
  std::ofstream(p) << "[model]\npreset = \"cnn\"\n";
  const Config snap = load_config(snapshot);
  EXPECT_EQ(snap.model.preset, PresetKind::Mlp);
  EXPECT_EQ(snap.train.lr, 0.01);
  EXPECT_EQ(snap.train.steps, 10);
  EXPECT_TRUE(snap.checkpoint.replicas);
  EXPECT_EQ(snap.run.dir, runs());
  EXPECT_EQ(snap.run.name, "try2");
  const std::string text = test::file_bytes(snapshot);
  EXPECT_EQ(text.substr(text.find("\n[run]")), to_toml(snap).substr(to_toml(snap).find("\n[run]")));

  // A second submission gets a snapshot of its own (the first job may still be queued).
  auto again = run({"submit", p, "--run-dir", runs(), "--name", "try2"});
  EXPECT_EQ(again.code, 0) << again.err;
  std::string snapshot2;
  last_line(test::file_bytes(script), &snapshot2);
  EXPECT_NE(snapshot2, snapshot);
  EXPECT_EQ(load_config(snapshot2).model.preset, PresetKind::Cnn);
  EXPECT_EQ(load_config(snapshot).model.preset, PresetKind::Mlp);
}

TEST_F(SubmitCli, WarnsWhenTheRunDirectoryHoldsAFinishedRun) {
  const std::string p = cfg();
  auto quiet = run({"submit", "--dry-run", p, "--run-dir", runs(), "--name", "done"});
  EXPECT_EQ(quiet.err.find("warning"), std::string::npos) << quiet.err;
  std::filesystem::create_directories(runs() + "/done");
  write_safetensors(runs() + "/done/final.safetensors", {{"w", Tensor::zeros({2})}}, {{"step", "10"}});
  auto r = run({"submit", "--dry-run", p, "--run-dir", runs(), "--name", "done"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1),
            "dptrain submit: warning: " + runs() + "/done already holds a finished run (" + runs() +
                "/done/final.safetensors from step 10): the job will resume it, find it complete and only evaluate. "
                "To train again, submit with another --name, or move " + runs() + "/done away first\n");
}

TEST_F(SubmitCli, MissingSbatchIsAnExactError) {
  const std::string p = cfg();
  ScopedEnv path("PATH", (dir_ / "nothing-here").string());
  auto r = run({"submit", p, "--run-dir", runs()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: sbatch not found on PATH: run `dptrain submit` on a Slurm login node, or add "
                   "--dry-run to print the script (written to " + runs() + "/default/submit.sbatch)\n");
  EXPECT_TRUE(std::filesystem::exists(runs() + "/default/submit.sbatch"));
}

TEST_F(SubmitCli, FailingSbatchIsAnExactError) {
  const std::string p = cfg();
  std::filesystem::create_directories(dir_ / "bin");
  const auto sbatch = dir_ / "bin/sbatch";
  std::ofstream(sbatch) << "#!/bin/sh\necho 'sbatch: error: invalid partition' >&2\nexit 1\n";
  std::filesystem::permissions(sbatch, std::filesystem::perms::owner_all);
  ScopedEnv path("PATH", (dir_ / "bin").string() + ":/usr/bin:/bin");
  auto r = run({"submit", p, "--run-dir", runs()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "sbatch: error: invalid partition\ndptrain: error: sbatch failed (exit status 1; its message is "
                   "above); the script is " + runs() + "/default/submit.sbatch\n");
}

TEST_F(SubmitCli, BadConfigFailsBeforeAnythingIsWritten) {
  std::string p = write("[train]\nlrr = 0.1\n");
  auto r = run({"submit", "--dry-run", p, "--run-dir", runs()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("dptrain: error: " + p + ":2: unknown key 'train.lrr' (did you mean 'train.lr'?)", 0), 0u)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs"));
}

TEST_F(SubmitCli, OneTaskPerGpuIsEnforced) {
  auto r = run({"submit", "--dry-run", "--gpus-per-node", "4", "--ntasks-per-node", "2", cfg()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dptrain: error: --ntasks-per-node 2 with --gpus-per-node 4: dptrain runs one task per GPU; leave "
                   "--ntasks-per-node out (or set it to 4)\n");
}

}  // namespace
}  // namespace dp::launch
