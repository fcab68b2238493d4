// Config parsing: values land in the typed structs, and every kind of malformed cfg is one
// exact error line naming file:line, the key, and the closest key or the allowed values.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "runtime/config.h"

namespace dp {
namespace {

std::string error_of(const std::string& text, const std::vector<std::string>& ov = {}) {
  try {
    parse_config(text, "m.cfg", ov);
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

const char* kMin = "[model]\npreset = \"mlp\"\n";

TEST(Config, ParsesTypedValues) {
  Config c = parse_config(
      "[run]\nname = \"x\"\nseed = 7\n[model]\npreset = \"cnn\"\n[train]\nlr = 0.5\nbatch_size = 32\n"
      "nesterov = true\noptimizer = \"sgd\"\n[data]\nmean = [0.1, 0.2, 0.3]\nstd = [1, 2, 3]\n",
      "m.cfg");
  EXPECT_EQ(c.run.name, "x");
  EXPECT_EQ(c.run.seed, 7);
  EXPECT_EQ(c.model.preset, PresetKind::Cnn);
  EXPECT_DOUBLE_EQ(c.train.lr, 0.5);
  EXPECT_EQ(c.train.batch_size, 32);
  EXPECT_TRUE(c.train.nesterov);
  EXPECT_EQ(c.train.optimizer, optim::OptimizerKind::Sgd);
  ASSERT_EQ(c.data.std.size(), 3u);
  EXPECT_DOUBLE_EQ(c.data.std[2], 3.0);  // integers are accepted where numbers are expected
}

TEST(Config, OverridesApplyAfterTheFile) {
  Config c = parse_config(std::string(kMin) + "[train]\nlr = 0.5\n", "m.cfg",
                          {"train.lr=0.01", "run.name=abc", "data.hflip=true", "model.hidden=[8, 4]"});
  EXPECT_DOUBLE_EQ(c.train.lr, 0.01);
  EXPECT_EQ(c.run.name, "abc");  // a bare word is a string
  EXPECT_TRUE(c.data.hflip);
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{8, 4}));
}

TEST(Config, CpuBackendIsAChoiceDefaultingToOnednn) {
  EXPECT_EQ(parse_config(kMin, "m.cfg").train.cpu_backend, CpuBackend::OneDnn);
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.cpu_backend=reference"}).train.cpu_backend, CpuBackend::Reference);
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\ncpu_backend = \"mkl\"\n"),
            "m.cfg:4: train.cpu_backend = \"mkl\" is not allowed; use one of: onednn, reference");
}

TEST(Config, CpuGemmIsAChoiceDefaultingToAuto) {
  EXPECT_EQ(parse_config(kMin, "m.cfg").train.cpu_gemm, CpuGemm::Auto);
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.cpu_gemm=openblas"}).train.cpu_gemm, CpuGemm::Openblas);
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.cpu_gemm=mkl"}).train.cpu_gemm, CpuGemm::Mkl);
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\ncpu_gemm = \"blis\"\n"),
            "m.cfg:4: train.cpu_gemm = \"blis\" is not allowed; use one of: auto, onednn, openblas, mkl");
  // What auto resolves to, and "mkl" without MKL: tests/runtime/test_cpu_gemm_choice.cpp.
}

TEST(Config, CudnnApiIsAChoiceDefaultingToLegacy) {
  EXPECT_EQ(parse_config(kMin, "m.cfg").train.cudnn_api, cuda::CudnnApi::Legacy);
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.cudnn_api=graph"}).train.cudnn_api, cuda::CudnnApi::Graph);
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\ncudnn_api = \"backend\"\n"),
            "m.cfg:4: train.cudnn_api = \"backend\" is not allowed; use one of: legacy, graph");
}

TEST(Config, Tf32IsAChoiceDefaultingToOff) {
  EXPECT_EQ(parse_config(kMin, "m.cfg").train.tf32, Tf32::Off);
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.tf32=conv"}).train.tf32, Tf32::Conv);
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.tf32=all"}).train.tf32, Tf32::All);
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\ntf32 = \"yes\"\n"),
            "m.cfg:4: train.tf32 = \"yes\" is not allowed; use one of: off, conv, all");
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\ntf32 = true\n"),
            "m.cfg:4: train.tf32 must be a string, got a boolean (true)");
}

TEST(Config, SyntheticDeviceIsAChoiceForSyntheticDataWithoutAugmentation) {
  const std::string synth = std::string(kMin) + "[data]\ndataset = \"synthetic\"\n";
  EXPECT_EQ(parse_config(synth, "m.cfg").data.synthetic_device, data::SyntheticDevice::Cpu);
  EXPECT_EQ(parse_config(synth, "m.cfg", {"data.synthetic_device=cuda"}).data.synthetic_device,
            data::SyntheticDevice::Cuda);
  EXPECT_EQ(error_of(synth, {"data.synthetic_device=gpu"}),
            "--set data.synthetic_device=gpu: data.synthetic_device = \"gpu\" is not allowed (did you mean \"cpu\"?); use "
            "one of: cpu, cuda");
  EXPECT_EQ(error_of(kMin, {"data.synthetic_device=cuda"}),
            "m.cfg: data.synthetic_device = \"cuda\" makes synthetic batches on the GPU, but data.dataset is "
            "\"fashion_mnist\": set data.dataset = \"synthetic\" or drop data.synthetic_device");
  EXPECT_EQ(error_of(synth, {"data.synthetic_device=cuda", "data.hflip=true"}),
            "m.cfg: data.synthetic_device = \"cuda\" makes batches without augmentation, but data.crop_padding = 0 "
            "and data.hflip = true: set data.crop_padding = 0 and data.hflip = false, or data.synthetic_device = "
            "\"cpu\"");
}

TEST(Config, BnImplAndGpuFusionAreParsedOnce) {
  const Config d = parse_config(kMin, "m.cfg", {});
  EXPECT_EQ(d.train.bn_impl, BnImpl::Cudnn);
  EXPECT_FALSE(d.train.gpu_fusion);  // until a GPU run has checked it
  EXPECT_FALSE(d.train.gpu_step_arena);  // likewise
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.bn_impl=own"}).train.bn_impl, BnImpl::Own);
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.bn_impl=cudnn_ex"}).train.bn_impl, BnImpl::CudnnEx);
  EXPECT_TRUE(parse_config(kMin, "m.cfg", {"train.gpu_fusion=true"}).train.gpu_fusion);
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\nbn_impl = \"graph\"\n"),
            "m.cfg:4: train.bn_impl = \"graph\" is not allowed; use one of: cudnn, own, cudnn_ex");
}

TEST(Config, UnknownKeySuggestsClosest) {
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\nlrr = 0.1\n"),
            "m.cfg:4: unknown key 'train.lrr' (did you mean 'train.lr'?); valid keys in [train]: epochs, steps, "
            "batch_size, optimizer, lr, momentum, dampening, nesterov, weight_decay, decay_params, grad_clip, beta1, "
            "beta2, eps, schedule, "
            "warmup_steps, warmup_start_factor, step_size, gamma, min_lr, label_smoothing, eval_every, log_every, "
            "device, precision, threads, cpu_backend, cpu_conv_algorithm, cpu_gemm, accum_steps, zero, elastic_batch, workspace_mb, cudnn_api, tf32, bn_impl, gpu_fusion, gpu_step_arena, loss_scale_init, loss_scale_growth_interval");
}

TEST(Config, UnknownSectionSuggestsClosest) {
  EXPECT_EQ(error_of(std::string(kMin) + "[trian]\nlr = 0.1\n"),
            "m.cfg:3: unknown section [trian] (did you mean [train]?); sections: run, data, model, train, dist, checkpoint, "
            "profile, layer");
}

TEST(Config, WrongType) {
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\nlr = \"fast\"\n"),
            "m.cfg:4: train.lr must be a number, got a string (\"fast\")");
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\nbatch_size = 1.5\n"),
            "m.cfg:4: train.batch_size must be an integer, got a float (1.5)");
}

TEST(Config, OutOfRange) {
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\nbatch_size = 0\n"),
            "m.cfg:4: train.batch_size = 0 is out of range [1, 1000000000]");
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\nmomentum = 1.5\n"),
            "m.cfg:4: train.momentum = 1.5 is out of range [0, 1]");
}

TEST(Config, IntegersBeyondADoubleInNumberKeysAreRangeCheckedNotGarbage) {
  // 2^53 + 1 has no double: it used to read as an empty value (lr = 4.66e-310, exit 0).
  EXPECT_EQ(error_of(kMin, {"train.lr=9007199254740993"}),
            "--set train.lr=9007199254740993: train.lr = 9007199254740993 is an integer beyond 2^53, which no number "
            "holds exactly; write it as a float (e.g. 9.007e+15) if you mean it");
  EXPECT_EQ(error_of(std::string(kMin) + "[data]\nmean = [-9007199254740993]\n"),
            "m.cfg:4: data.mean = -9007199254740993 is an integer beyond 2^53, which no number holds exactly; write "
            "it as a float (e.g. -9.007e+15) if you mean it");
  EXPECT_EQ(error_of(kMin, {"train.lr=1000001"}), "--set train.lr=1000001: train.lr = 1000001 is out of range [0, 1000000]");
  Config c = parse_config(kMin, "m.cfg", {"train.lr=3", "data.mean=[1]", "data.std=[9007199254740992]"});
  EXPECT_DOUBLE_EQ(c.train.lr, 3.0);
  EXPECT_EQ(c.data.mean, (std::vector<double>{1.0}));
  EXPECT_EQ(c.data.std, (std::vector<double>{9007199254740992.0}));  // 2^53 itself is exact
}

TEST(Config, RunNameIsOneFolderName) {
  // "../x" used to write outside run.dir.
  for (const std::string name : {"../x", "a/b", "..", ".", "", "/abs"})
    EXPECT_EQ(error_of(kMin, {"run.name=\"" + name + "\""}),
              "m.cfg: run.name = \"" + name + "\" is not a single folder name (no '/', not empty, '.' or '..'): the "
              "run directory is <run.dir>/<run.name>; to put runs elsewhere set run.dir (--run-dir)")
        << name;
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"run.name=\"..x.y\""}).run.name, "..x.y");
}

// train.schedule's words come from kScheduleKindNames (runtime/optim/schedule.h), parsed once here.
TEST(Config, ScheduleKindsParseByName) {
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.schedule=constant"}).train.schedule, optim::ScheduleKind::Constant);
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.schedule=step"}).train.schedule, optim::ScheduleKind::Step);
  EXPECT_EQ(parse_config(kMin, "m.cfg", {"train.schedule=cosine"}).train.schedule, optim::ScheduleKind::Cosine);
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\nschedule = \"cosin\"\n"),
            "m.cfg:4: train.schedule = \"cosin\" is not allowed (did you mean \"cosine\"?); use one of: constant, step, "
            "cosine");
  EXPECT_EQ(error_of(kMin, {"train.schedule=exponential"}),
            "--set train.schedule=exponential: train.schedule = \"exponential\" is not allowed; use one of: constant, "
            "step, cosine");
}

TEST(Config, NotAnAllowedValue) {
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\noptimizer = \"adam\"\n"),
            "m.cfg:4: train.optimizer = \"adam\" is not allowed (did you mean \"adamw\"?); use one of: sgd, adamw");
}

TEST(Config, MissingModel) {
  EXPECT_EQ(error_of("[train]\nlr = 0.1\n"),
            "m.cfg: no model given: set model.preset (one of: mlp, cnn, resnet18, resnet50, cifar_resnet18, gpt2) or "
            "write a [[layer]] list");
}

TEST(Config, LayerWithoutType) {
  EXPECT_EQ(error_of("[[layer]]\ntype = \"flatten\"\n\n[[layer]]\nout_features = 10\n"),
            "m.cfg:4: [[layer]] #2 is missing the required key 'type'");
}

TEST(Config, LayerListKeepsArgsAndPositions) {
  Config c = parse_config(
      "[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\nname = \"fc\"\nout_features = 10\n"
      "inputs = [\"flatten1\"]\n",
      "m.cfg");
  ASSERT_EQ(c.model.layers.size(), 2u);
  EXPECT_EQ(c.model.layers[0].name, "flatten1");  // default name: type + position
  const LayerSpec& fc = c.model.layers[1];
  EXPECT_EQ(fc.name, "fc");
  EXPECT_EQ(std::get<int64_t>(fc.args.at("out_features")), 10);
  EXPECT_EQ(fc.arg_pos.at("out_features").line, 6);
  EXPECT_EQ(fc.inputs, std::vector<std::string>{"flatten1"});
}

TEST(Config, SyntaxError) {
  std::string e = error_of("[train\nlr = 1\n");
  EXPECT_EQ(e.rfind("m.cfg:1:", 0), 0u) << e;
  EXPECT_NE(e.find("TOML syntax error"), std::string::npos) << e;
}

TEST(Config, BadOverride) {
  EXPECT_EQ(error_of(kMin, {"train.lrr=0.1"}), "--set train.lrr=0.1: unknown key 'train.lrr' (did you mean 'train.lr'?)");
  EXPECT_EQ(error_of(kMin, {"lr"}), "--set lr: expected section.key=value (e.g. --set train.lr=0.01)");
  EXPECT_EQ(error_of(kMin, {"train.lr=abc"}), "--set train.lr=abc: train.lr must be a number, got a string (\"abc\")");
}

// TOML text is UTF-8, so a --set value must be: one that is not could not be written to
// config.toml and read back (found by fuzz_config: run.name=x\xb7). UTF-8 names round-trip.
TEST(Config, OverrideValuesMustBeUtf8) {
  EXPECT_EQ(error_of(kMin, {"run.name=x\xb7"}),
            "--set run.name: the value is not valid UTF-8 (byte 2 of it); give the value as UTF-8 text");
  EXPECT_EQ(error_of(kMin, {"data.path=\"ab\xc3\""}),
            "--set data.path: the value is not valid UTF-8 (byte 4 of it); give the value as UTF-8 text");
  const Config c = parse_config(kMin, "m.cfg", {"run.name=r\xc3\xa9sum\xc3\xa9"});
  EXPECT_EQ(c.run.name, "r\xc3\xa9sum\xc3\xa9");
  EXPECT_EQ(parse_config(to_toml(c), "m.cfg").run.name, c.run.name);
}

TEST(Config, MissingFile) {
  try {
    load_config("/nonexistent/m.cfg");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "cannot read config file '/nonexistent/m.cfg': No such file or directory (give the path of a "
                 "model.cfg, e.g. models/fmnist_cnn.cfg)");
  }
}

TEST(Config, ResolvedConfigRoundTrips) {
  Config c = parse_config(
      "[model]\npreset = \"cnn\"\n[train]\nlr = 0.25\n[data]\nmean = [0.5]\nstd = [0.25]\n", "m.cfg", {"run.seed=3"});
  Config back = parse_config(to_toml(c), "resolved.toml");
  EXPECT_EQ(to_toml(back).substr(to_toml(back).find('\n')), to_toml(c).substr(to_toml(c).find('\n')));
  EXPECT_DOUBLE_EQ(back.train.lr, 0.25);
  EXPECT_EQ(back.run.seed, 3);
  Config l = parse_config("[[layer]]\ntype = \"linear\"\nname = \"fc\"\nout_features = 3\nbias = false\n", "m.cfg");
  Config lb = parse_config(to_toml(l), "resolved.toml");
  ASSERT_EQ(lb.model.layers.size(), 1u);
  EXPECT_EQ(std::get<bool>(lb.model.layers[0].args.at("bias")), false);
}

// A layer's type, name, inputs and argument keys are written as TOML strings, escaped and quoted
// where needed (CI's fuzz_config: a type of "add" and two backslashes was written raw inside quotes
// and read back with one; a key "a b" was written bare and did not parse).
TEST(Config, LayerStringsWithBackslashesAndQuotesRoundTrip) {
  Config c = parse_config(
      "[[layer]]\ntype = \"add\\\\\\\\\"\nname = \"a'b\\\"c\"\ninputs = [\"x\\\\y\", \"input\"]\nlabel = \"q\\\"\"\n"
      "\"a b\" = 3\n'x=y' = true\n",
      "m.cfg");
  ASSERT_EQ(c.model.layers.size(), 1u);
  EXPECT_EQ(c.model.layers[0].type, "add\\\\");
  EXPECT_EQ(c.model.layers[0].name, "a'b\"c");
  Config back = parse_config(to_toml(c), "resolved.toml");
  ASSERT_EQ(back.model.layers.size(), 1u);
  EXPECT_EQ(back.model.layers[0].type, "add\\\\");
  EXPECT_EQ(back.model.layers[0].name, "a'b\"c");
  EXPECT_EQ(back.model.layers[0].inputs, (std::vector<std::string>{"x\\y", "input"}));
  EXPECT_EQ(std::get<std::string>(back.model.layers[0].args.at("label")), "q\"");
  EXPECT_EQ(std::get<int64_t>(back.model.layers[0].args.at("a b")), 3);  // keys no bare key can write
  EXPECT_EQ(std::get<bool>(back.model.layers[0].args.at("x=y")), true);
  EXPECT_EQ(to_toml(back).substr(to_toml(back).find('\n')), to_toml(c).substr(to_toml(c).find('\n')));
}

// A key holding a newline (CI's fuzz_config, 2026-11-30: [[layer]] ... "xmo}\ntum=y" = 1): toml++
// wrote it as a multi-line string, which TOML does not allow as a key, and the resolved config did
// not parse. Keys are quoted and escaped on one line: control characters as \uXXXX.
TEST(Config, LayerKeysWithControlCharactersRoundTrip) {
  const Config c = parse_config("[[layer]]\ntype = \"linear\"\n\"a b\" = 3\n\"xmo}\\ntum=y\" = 1\n\"t\\t\\\"q\\\\\" = 2\n", "m.cfg");
  const Config back = parse_config(to_toml(c), "resolved.toml");
  ASSERT_EQ(back.model.layers.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(back.model.layers[0].args.at("xmo}\ntum=y")), 1);
  EXPECT_EQ(std::get<int64_t>(back.model.layers[0].args.at("t\t\"q\\")), 2);
  const std::string a = to_toml(c), r = to_toml(back);
  EXPECT_EQ(r.substr(r.find('\n')), a.substr(a.find('\n')));  // all but the first line, which names the source
}

// Floats print as the shortest text that reads back as the same double, and stay floats.
TEST(Config, FloatsPrintShortestAndRoundTripExactly) {
  Config c = parse_config(std::string(kMin) + "[train]\nlr = 0.1\nweight_decay = 1e-08\n", "m.cfg");
  const std::string t = to_toml(c);
  EXPECT_NE(t.find("\nmean = [0.286]\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nmomentum = 0.9\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nlr = 0.1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nweight_decay = 1e-08\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nloss_scale_init = 65536.0\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("99999"), std::string::npos) << t;
  EXPECT_EQ(t.find("00000001"), std::string::npos) << t;
  // Awkward doubles come back bit for bit.
  for (double v : {0.1 + 0.2, 1.0 / 3.0, 2.5e-300, 123456.125, 0.28599999999999998, 1e-7 / 3.0}) {
    Config x = parse_config(kMin, "m.cfg", {fmt::format("train.min_lr={:.17g}", v)});
    Config back = parse_config(to_toml(x), "resolved.toml");
    EXPECT_EQ(back.train.min_lr, v) << to_toml(x);
  }
  const std::string ref = config_reference();
  EXPECT_NE(ref.find("| `mean` | `[0.286]` |"), std::string::npos);
  EXPECT_NE(ref.find("| `beta1` | `0.9` |"), std::string::npos);
}

// The language-model keys: token shards need their evaluation shards and take no normalisation;
// train.grad_clip and train.decay_params are checked and round-trip.
TEST(Config, TokensGradClipAndDecayParams) {
  const std::string tokens = std::string(kMin) + "block_size = 64\nvocab_size = 256\n[data]\ndataset = \"tokens\"\n"
                             "path = \"d/train_*.bin\"\n";
  EXPECT_EQ(error_of(tokens), "m.cfg: data.dataset = \"tokens\" needs data.val_path, the evaluation token shards (e.g. "
                              "\"data/val_*.bin\")");
  Config c = parse_config(tokens + "val_path = \"d/val_*.bin\"\n[train]\ngrad_clip = 1.0\ndecay_params = \"matrices\"\n",
                          "m.cfg");
  EXPECT_TRUE(c.data.mean.empty() && c.data.std.empty());  // no normalisation of token ids
  EXPECT_EQ(c.model.block_size, 64);
  EXPECT_EQ(c.model.vocab_size, 256);
  EXPECT_EQ(c.train.grad_clip, 1.0);
  EXPECT_EQ(c.train.decay_params, optim::DecayParams::Matrices);
  Config back = parse_config(to_toml(c), "resolved.toml");
  EXPECT_EQ(back.train.decay_params, optim::DecayParams::Matrices);
  EXPECT_EQ(back.train.grad_clip, 1.0);
  const Config d = parse_config(kMin, "m.cfg");  // defaults: today's behaviour
  EXPECT_EQ(d.train.decay_params, optim::DecayParams::All);
  EXPECT_EQ(d.train.grad_clip, 0.0);
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\ngrad_clip = -1\n"), "m.cfg:4: train.grad_clip = -1 is out of range [0, 1000000000]");
  EXPECT_EQ(error_of(std::string(kMin) + "[train]\ndecay_params = \"matrix\"\n"),
            "m.cfg:4: train.decay_params = \"matrix\" is not allowed (did you mean \"matrices\"?); use one of: all, "
            "matrices");
}

TEST(Config, InitAndInitSkip) {
  Config c = parse_config(std::string(kMin) + "init = \"w.safetensors\"\ninit_skip = [\"fc.*\", \"layer4.*\"]\n", "m.cfg");
  EXPECT_EQ(c.model.init, "w.safetensors");
  EXPECT_EQ(c.model.init_skip, (std::vector<std::string>{"fc.*", "layer4.*"}));
  Config back = parse_config(to_toml(c), "resolved.toml");
  EXPECT_EQ(back.model.init_skip, c.model.init_skip);
  EXPECT_EQ(error_of(std::string(kMin) + "init_skip = [1]\n"),
            "m.cfg:3: model.init_skip must be an array of strings, got an array");
  EXPECT_EQ(error_of(std::string(kMin) + "init_skip = [\"fc.*\"]\n"),
            "m.cfg: model.init_skip is set but model.init is empty: name the weights file to start from "
            "(model.init = \"weights.safetensors\") or drop model.init_skip");
  EXPECT_TRUE(parse_config(kMin, "m.cfg").dist.broadcast_buffers);
}

TEST(Config, ExampleConfigsParse) {
  for (const char* f :
       {"fmnist_cnn.cfg", "fmnist_mlp.cfg", "cifar_resnet18.cfg", "resnet50.cfg", "gpt2.cfg", "gpt_tiny.cfg"}) {
    EXPECT_NO_THROW(load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/" + f)) << f;
  }
}

}  // namespace
}  // namespace dp

// Image data sets default to torchvision's ResNet recipe (ImageNet normalisation, flips) unless
// the keys are given; arrays are not normalised; resize follows image_size; model.num_classes
// defaults to 0 (the data's count); the image keys are checked.
TEST(Config, DataSetDependentDefaults) {
  const std::string m = "[model]\npreset = \"cnn\"\n";
  dp::Config img = dp::parse_config(m + "[data]\ndataset = \"image_folder\"\npath = \"d\"\n", "m.cfg");
  EXPECT_EQ(img.data.mean, (std::vector<double>{0.485, 0.456, 0.406}));
  EXPECT_EQ(img.data.std, (std::vector<double>{0.229, 0.224, 0.225}));
  EXPECT_TRUE(img.data.hflip);
  EXPECT_EQ(img.data.resize, 256);
  EXPECT_EQ(img.model.num_classes, 0);
  dp::Config given = dp::parse_config(m + "[data]\ndataset = \"image_folder\"\nimage_size = 32\nhflip = false\n", "m.cfg",
                                      {"data.mean=[0.5, 0.5, 0.5]"});
  EXPECT_EQ(given.data.mean, (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_EQ(given.data.std, (std::vector<double>{0.229, 0.224, 0.225}));
  EXPECT_FALSE(given.data.hflip);
  EXPECT_EQ(given.data.resize, 37);  // round(32 * 8 / 7)
  dp::Config npy = dp::parse_config(m + "[data]\ndataset = \"npy\"\n", "m.cfg");
  EXPECT_TRUE(npy.data.mean.empty());
  dp::Config fm = dp::parse_config(m, "m.cfg");
  EXPECT_EQ(fm.data.mean, (std::vector<double>{0.2860}));  // Fashion-MNIST as before
  EXPECT_FALSE(fm.data.hflip);
  // The resolved config reads back the same (but for its first line, naming the source).
  auto body = [](const std::string& t) { return t.substr(t.find('\n')); };
  EXPECT_EQ(body(dp::to_toml(dp::parse_config(dp::to_toml(img), "r.toml"))), body(dp::to_toml(img)));
}

TEST(Config, ImageKeysAreChecked) {
  auto err = [](const std::string& text) {
    try {
      dp::parse_config("[model]\npreset = \"cnn\"\n" + text, "m.cfg");
    } catch (const dp::UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(err("[data]\ncrop_scale = [0.5]\n"), "m.cfg: data.crop_scale must be [low, high] with 0 < low <= high <= 1, got [0.5]");
  EXPECT_EQ(err("[data]\ncrop_ratio = [2, 1]\n"), "m.cfg: data.crop_ratio must be [low, high] with 0 < low <= high, got [2, 1]");
  EXPECT_EQ(err("[data]\nimage_size = 64\nresize = 60\n"),
            "m.cfg: data.resize = 60 is smaller than data.image_size = 64: the centre crop needs resize >= image_size");
  EXPECT_EQ(err("[data]\ndataset = \"tar_shards\"\npath = \"t-{0..3}.tar\"\n"),
            "m.cfg: data.dataset = \"tar_shards\" needs data.val_path, the evaluation shards (e.g. "
            "\"val-{0000..0006}.tar\")");
}

namespace dp {
namespace {

// The gpt2 preset: GPT-2 124M by default, sized by the [model] keys, each bad value an error
// naming its key.
TEST(Config, Gpt2PresetKeys) {
  const Config d = parse_config("[model]\npreset = \"gpt2\"\n", "m.cfg");
  EXPECT_EQ(d.model.preset, PresetKind::Gpt2);
  EXPECT_EQ(d.model.n_layer, 12);
  EXPECT_EQ(d.model.n_head, 12);
  EXPECT_EQ(d.model.n_embd, 768);
  EXPECT_EQ(d.model.block_size, 1024);
  EXPECT_EQ(d.model.vocab_size, 50257);
  EXPECT_TRUE(d.model.bias);
  const Config t = parse_config("[model]\npreset = \"gpt2\"\nn_layer = 2\nn_head = 4\nn_embd = 64\nblock_size = 32\n"
                                "vocab_size = 256\nbias = false\ndropout = 0.1\n",
                                "m.cfg");
  EXPECT_EQ(t.model.n_layer, 2);
  EXPECT_EQ(t.model.n_embd, 64);
  EXPECT_FALSE(t.model.bias);
  EXPECT_NE(to_toml(t).find("n_embd = 64\nblock_size = 32\nvocab_size = 256\nbias = false"), std::string::npos);
  EXPECT_EQ(error_of("[model]\npreset = \"gpt2\"\nn_embd = 100\n"),
            "m.cfg: model.n_embd = 100 is not a multiple of model.n_head = 12: each head takes n_embd / n_head "
            "dimensions; choose n_embd a multiple of n_head (e.g. 108)");
  EXPECT_EQ(error_of("[model]\npreset = \"gpt2\"\nblock_size = 0\n"),
            "m.cfg:3: model.block_size = 0 is out of range [1, 1048576]");
  EXPECT_EQ(error_of("[model]\npreset = \"gpt2\"\nvocab_size = 0\n"),
            "m.cfg:3: model.vocab_size = 0 is out of range [1, 2147483647]");
  EXPECT_EQ(error_of("[model]\npreset = \"gpt2\"\nn_head = 0\n"), "m.cfg:3: model.n_head = 0 is out of range [1, 65536]");
  EXPECT_EQ(error_of("[model]\npreset = \"gpt2\"\nn_layer = 1.5\n"),
            "m.cfg:3: model.n_layer must be an integer, got a float (1.5)");
}

}  // namespace
}  // namespace dp
