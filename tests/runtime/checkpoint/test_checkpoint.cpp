// Checkpoint format (runtime/checkpoint/checkpoint.h) and folder (runtime/checkpoint/checkpoint_dir.h): the file's
// layout, names, metadata and CRCs; a bitwise round trip of model and optimizer state; corrupt,
// truncated, wrong-version and mismatching files as errors naming the file and the tensor, with
// nothing changed; `latest`, keep-K, and resume falling back over a corrupt newest file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/build.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/config.h"
#include "base/crc32c.h"
#include "runtime/log.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/sgd.h"
#include "tests/bytes.h"

namespace dp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// conv(2) -> bn -> relu -> flatten -> linear(3) on [1, 4, 4]: parameters, f32 and i64 buffers.
const char* kModel = R"(
[model]
num_classes = 3
[[layer]]
type = "conv2d"
name = "conv1"
out_channels = 2
kernel = 3
padding = 1
[[layer]]
type = "batchnorm2d"
name = "bn1"
[[layer]]
type = "relu"
[[layer]]
type = "flatten"
[[layer]]
type = "linear"
name = "fc"
out_features = 3
)";

std::unique_ptr<Graph> make_model(uint64_t seed, int out_channels = 2) {
  Config c = parse_config(kModel, "m.cfg", {});
  c.model.layers[0].args["out_channels"] = int64_t{out_channels};
  return models::build_model(c.model, {1, 4, 4}, seed);
}

// A few optimizer steps with made-up gradients, and made-up running statistics, so that every
// tensor of the checkpoint holds something distinctive.
void advance(Graph& g, optim::Optimizer& opt, int steps, uint64_t seed) {
  Rng rng(seed, 9);
  for (int s = 0; s < steps; ++s) {
    float* gr = g.grads().flat().data<float>();
    for (int64_t i = 0; i < g.grads().numel(); ++i) gr[i] = static_cast<float>(rng.normal());
    opt.step(g.params().flat(), g.grads().flat(), 0.01);
  }
  for (const auto& b : g.buffers()) {
    if (b.tensor.dtype() == DType::I64) b.tensor.data<int64_t>()[0] = 1000 + steps;
    else
      for (int64_t i = 0; i < b.tensor.numel(); ++i) b.tensor.data<float>()[i] = static_cast<float>(rng.uniform());
  }
}

CheckpointMeta meta_for(int64_t step, const optim::Optimizer& opt) {
  CheckpointMeta m;
  m.step = step;
  m.epoch = 2;
  m.epoch_samples = 96;
  m.seed = 42;
  m.batch_size = 32;
  m.dataset_size = 500;
  m.shuffle = true;
  m.drop_last = false;
  m.optimizer = opt.name();
  m.optimizer_steps = opt.steps();
  m.config = "[run]\nseed = 42\n";
  return m;
}


// Every state tensor and optimizer slot, as bytes, plus the step count.
std::string snapshot(const Graph& g, const optim::Optimizer& opt) {
  std::string s;
  for (const auto& nt : g.state()) s += nt.name + "=" + test::tensor_bytes(nt.tensor) + ";";
  for (const auto& [n, t] : opt.state()) s += n + "=" + test::tensor_bytes(t) + ";";
  return s + "steps=" + std::to_string(opt.steps());
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::configure("off");
    dir_ = (fs::temp_directory_path() / ("dptrain_ckpt_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A checkpoint of a model advanced `steps` steps with SGD + momentum, at `path`.
  void write_sgd(const std::string& path, int steps, uint64_t seed = 1) {
    auto g = make_model(seed);
    auto opt = optim::make_sgd(g->num_parameters(), {0.9, 0, 0, false});
    advance(*g, *opt, steps, seed);
    write_checkpoint(path, *g, *opt, meta_for(steps, *opt));
  }

  std::string dir_;
};

TEST_F(CheckpointTest, LayoutNamesMetadataAndCrcs) {
  const std::string path = dir_ + "/c.safetensors";
  auto g = make_model(1);
  auto opt = optim::make_adamw(g->num_parameters(), {});
  advance(*g, *opt, 3, 1);
  write_checkpoint(path, *g, *opt, meta_for(3, *opt));

  SafetensorsFile f = SafetensorsFile::open(path);
  // i64 first (alignment), then model state in registration order, then optimizer slots per
  // parameter with the parameter's shape.
  EXPECT_EQ(f.names(), (std::vector<std::string>{
                           "bn1.num_batches_tracked", "conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias",
                           "bn1.running_mean", "bn1.running_var", "fc.weight", "fc.bias",
                           "optim.conv1.weight.exp_avg", "optim.conv1.weight.exp_avg_sq", "optim.conv1.bias.exp_avg",
                           "optim.conv1.bias.exp_avg_sq", "optim.bn1.weight.exp_avg", "optim.bn1.weight.exp_avg_sq",
                           "optim.bn1.bias.exp_avg", "optim.bn1.bias.exp_avg_sq", "optim.fc.weight.exp_avg",
                           "optim.fc.weight.exp_avg_sq", "optim.fc.bias.exp_avg", "optim.fc.bias.exp_avg_sq"}));
  EXPECT_EQ(f.info("optim.conv1.weight.exp_avg").shape, (Shape{2, 1, 3, 3}));
  EXPECT_EQ(f.info("optim.fc.weight.exp_avg_sq").shape, (Shape{3, 32}));
  EXPECT_EQ(f.info("bn1.num_batches_tracked").dtype, DType::I64);
  // The optimizer slices are the flat state at the parameter's arena offset.
  const auto& slot = g->params().slot(g->params().size() - 2);  // fc.weight
  ASSERT_EQ(slot.name, "fc.weight");
  EXPECT_EQ(test::tensor_bytes(f.get("optim.fc.weight.exp_avg_sq")),
            test::tensor_bytes(opt->state()[1].second.slice_flat(slot.offset, slot.shape)));

  const auto& md = f.metadata();
  EXPECT_EQ(md.at("format"), "dptrain-checkpoint");
  EXPECT_EQ(md.at("format_version"), "1");
  EXPECT_EQ(md.at("step"), "3");
  EXPECT_EQ(md.at("epoch"), "2");
  EXPECT_EQ(md.at("epoch_samples"), "96");
  EXPECT_EQ(md.at("seed"), "42");
  EXPECT_EQ(md.at("world_size"), "1");
  EXPECT_EQ(md.at("batch_size"), "32");
  EXPECT_EQ(md.at("optimizer"), "adamw");
  EXPECT_EQ(md.at("optimizer_steps"), "3");
  EXPECT_EQ(md.at("sampler"), R"({"dataset_size":500,"drop_last":false,"shuffle":true})");
  EXPECT_EQ(md.at("config"), "[run]\nseed = 42\n");
  EXPECT_EQ(md.at("dtype_policy"), "params f32, optimizer state f32, compute fp32");
  EXPECT_THAT(md.at("rng"), HasSubstr("philox"));

  // One CRC per tensor, each equal to crc32c over the tensor's bytes.
  auto crcs = nlohmann::json::parse(md.at("crc32c"));
  EXPECT_EQ(crcs.size(), f.names().size());
  for (const auto& name : f.names()) {
    Tensor t = f.get(name);
    EXPECT_EQ(crcs.at(name).get<std::string>(), fmt::format("{:08x}", crc32c(t.raw(), t.nbytes()))) << name;
  }
  for (const auto& c : check_crcs(f)) EXPECT_TRUE(c.ok()) << c.name;

  CheckpointMeta back = read_checkpoint_meta(f);
  EXPECT_EQ(back.step, 3);
  EXPECT_EQ(back.epoch_samples, 96);
  EXPECT_EQ(back.dataset_size, 500);
  EXPECT_TRUE(back.shuffle);
  EXPECT_FALSE(back.drop_last);
  EXPECT_EQ(back.optimizer, "adamw");
}

TEST_F(CheckpointTest, RoundTripIsBitwiseForSgdAndAdamW) {
  for (bool adam : {false, true}) {
    SCOPED_TRACE(adam ? "adamw" : "sgd");
    auto make_opt = [&](int64_t n) {
      return adam ? optim::make_adamw(n, {}) : optim::make_sgd(n, {0.9, 0.1, 1e-4, false});
    };
    const std::string path = dir_ + "/rt.safetensors";
    auto g = make_model(1);
    auto opt = make_opt(g->num_parameters());
    advance(*g, *opt, 4, 3);
    write_checkpoint(path, *g, *opt, meta_for(4, *opt));
    const std::string want = snapshot(*g, *opt);

    auto g2 = make_model(77);  // other initial values
    auto opt2 = make_opt(g2->num_parameters());
    ASSERT_NE(snapshot(*g2, *opt2), want);
    CheckpointMeta m = load_checkpoint(path, *g2, *opt2);
    EXPECT_EQ(m.step, 4);
    EXPECT_EQ(snapshot(*g2, *opt2), want);

    // And both go on identically.
    advance(*g, *opt, 2, 5);
    advance(*g2, *opt2, 2, 5);
    EXPECT_EQ(snapshot(*g2, *opt2), snapshot(*g, *opt));
  }
}

// Flips one byte of `tensor`'s data in the file at `path`.
void flip_byte_of(const std::string& path, const std::string& tensor, size_t at = 0) {
  SafetensorsFile f = SafetensorsFile::open(path);
  uint64_t header_len = 0;
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(&header_len), 8);
  }
  const size_t offset = 8 + header_len + f.info(tensor).begin + at;
  std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
  io.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  io.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  io.seekp(static_cast<std::streamoff>(offset));
  io.write(&c, 1);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(CheckpointTest, CorruptByteIsAnErrorNamingFileAndTensorAndChangesNothing) {
  const std::string path = dir_ + "/bad.safetensors";
  write_sgd(path, 3);
  flip_byte_of(path, "fc.weight", 17);
  auto g = make_model(9);
  auto opt = optim::make_sgd(g->num_parameters(), {0.9, 0, 0, false});
  const std::string before = snapshot(*g, *opt);
  std::string err = error_of([&] { load_checkpoint(path, *g, *opt); });
  EXPECT_THAT(err, HasSubstr("checkpoint '" + path + "' is corrupt: tensor 'fc.weight' fails its CRC-32C check (stored "));
  EXPECT_EQ(snapshot(*g, *opt), before) << "a failed load must leave the model and optimizer as they were";

  SafetensorsFile f = SafetensorsFile::open(path);
  int bad = 0;
  for (const auto& c : check_crcs(f)) bad += !c.ok();
  EXPECT_EQ(bad, 1);
}

TEST_F(CheckpointTest, TruncatedFileIsAnErrorNamingFileAndTensor) {
  const std::string path = dir_ + "/short.safetensors";
  write_sgd(path, 2);
  fs::resize_file(path, fs::file_size(path) - 10);
  auto g = make_model(1);
  auto opt = optim::make_sgd(g->num_parameters(), {0.9, 0, 0, false});
  std::string err = error_of([&] { load_checkpoint(path, *g, *opt); });
  EXPECT_THAT(err, HasSubstr("'" + path + "'"));
  EXPECT_THAT(err, HasSubstr("tensor 'optim.fc.bias.momentum_buffer'"));  // the last one in the file
  EXPECT_THAT(err, HasSubstr("truncated"));
}

// Rewrites `path` with one metadata value changed.
void set_metadata(const std::string& path, const std::string& key, const std::string& value) {
  SafetensorsFile f = SafetensorsFile::open(path);
  std::vector<std::pair<std::string, Tensor>> ts;
  for (const auto& n : f.names()) ts.emplace_back(n, f.get(n));
  auto md = f.metadata();
  md[key] = value;
  write_safetensors(path, ts, md);
}

TEST_F(CheckpointTest, OtherFormatVersionSaysWhatToDo) {
  const std::string path = dir_ + "/v2.safetensors";
  write_sgd(path, 1);
  set_metadata(path, "format_version", "2");
  auto g = make_model(1);
  auto opt = optim::make_sgd(g->num_parameters(), {0.9, 0, 0, false});
  EXPECT_EQ(error_of([&] { load_checkpoint(path, *g, *opt); }),
            "checkpoint '" + path + "' has format_version '2', but this dptrain reads version 1: resume it with the "
            "dptrain that wrote it, or start over with --reset");
  set_metadata(path, "format", "dptrain-weights");
  EXPECT_EQ(error_of([&] { load_checkpoint(path, *g, *opt); }),
            "'" + path + "' is not a dptrain checkpoint (metadata format = 'dptrain-weights', want "
            "'dptrain-checkpoint'): final.safetensors holds weights only; resume from checkpoints/");
}

TEST_F(CheckpointTest, OtherModelIsAnErrorNamingTheFirstMismatchingTensor) {
  const std::string path = dir_ + "/m.safetensors";
  write_sgd(path, 1);
  auto wide = make_model(1, /*out_channels=*/4);
  auto opt = optim::make_sgd(wide->num_parameters(), {0.9, 0, 0, false});
  EXPECT_EQ(error_of([&] { load_checkpoint(path, *wide, *opt); }),
            "checkpoint '" + path + "' does not match the model: tensor 'conv1.weight' is f32[2, 1, 3, 3] in the "
            "checkpoint but f32[4, 1, 3, 3] in the model; was it written for another model? (start over with --reset)");
  // Another optimizer is named as such.
  auto g = make_model(1);
  auto adam = optim::make_adamw(g->num_parameters(), {});
  EXPECT_EQ(error_of([&] { load_checkpoint(path, *g, *adam); }),
            "checkpoint '" + path + "' holds sgd optimizer state, but this run uses train.optimizer = \"adamw\": set it "
            "back, or start over with --reset");
}

TEST_F(CheckpointTest, DirNamesLatestKeepAndStartOver) {
  CheckpointDir d(dir_ + "/checkpoints");
  EXPECT_TRUE(d.list().empty());
  d.prepare();
  EXPECT_EQ(d.file_for(12), dir_ + "/checkpoints/step-00000012.safetensors");
  EXPECT_EQ(d.file_for(123456789), dir_ + "/checkpoints/step-123456789.safetensors");
  std::ofstream(dir_ + "/checkpoints/step-00000099.safetensors.tmp") << "partial";
  std::ofstream(dir_ + "/checkpoints/notes.txt") << "not a checkpoint";
  d.prepare();
  EXPECT_FALSE(fs::exists(dir_ + "/checkpoints/step-00000099.safetensors.tmp")) << "leftover of a killed write";
  for (int64_t s : {5, 10, 15, 20}) {
    write_sgd(d.file_for(s), 1);
    d.commit(s, /*keep=*/3);
    EXPECT_EQ(d.latest(), fmt::format("step-{:08}.safetensors", s));
  }
  auto l = d.list();
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].step, 20);
  EXPECT_EQ(l[1].step, 15);
  EXPECT_EQ(l[2].step, 10);
  EXPECT_FALSE(fs::exists(d.file_for(5)));
  EXPECT_TRUE(fs::exists(dir_ + "/checkpoints/notes.txt"));
  d.commit(20, /*keep=*/0);  // keep all
  EXPECT_EQ(d.list().size(), 3u);
  EXPECT_EQ(d.remove_all(), 3);
  EXPECT_TRUE(d.list().empty());
  EXPECT_EQ(d.latest(), "");
}

TEST_F(CheckpointTest, ResumeFallsBackOverACorruptNewestCheckpoint) {
  CheckpointDir d(dir_ + "/checkpoints");
  d.prepare();
  for (int64_t s : {2, 4, 6}) {
    write_sgd(d.file_for(s), static_cast<int>(s));
    d.commit(s, 3);
  }
  flip_byte_of(d.file_for(6), "optim.conv1.weight.momentum_buffer", 3);
  auto g = make_model(5);
  auto opt = optim::make_sgd(g->num_parameters(), {0.9, 0, 0, false});
  auto r = resume_latest(d, *g, *opt);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->path, d.file_for(4));
  EXPECT_EQ(r->meta.step, 4);
  EXPECT_EQ(opt->steps(), 4);
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_EQ(r->skipped[0].path, d.file_for(6));
  EXPECT_THAT(r->skipped[0].reason, HasSubstr("tensor 'optim.conv1.weight.momentum_buffer' fails its CRC-32C check"));

  // Nothing usable: one error listing every reason.
  flip_byte_of(d.file_for(4), "conv1.bias");
  fs::resize_file(d.file_for(2), 100);
  std::string err = error_of([&] { resume_latest(d, *g, *opt); });
  EXPECT_THAT(err, HasSubstr("none of the 3 checkpoints in '" + d.path() + "' can be resumed (each reason is logged "
                             "above); the newest: checkpoint '" + d.file_for(6) + "' is corrupt: tensor "
                             "'optim.conv1.weight.momentum_buffer' fails its CRC-32C check"));
  EXPECT_THAT(err, HasSubstr("start over with --reset (or checkpoint.resume = false)"));

  CheckpointDir empty(dir_ + "/none");
  EXPECT_FALSE(resume_latest(empty, *g, *opt).has_value());
}

// Replaces the first `from` in the file's bytes by `to` (same length: the header keeps its size).
void edit_in_place(const std::string& path, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  f.seekp(static_cast<std::streamoff>(at));
  f.write(to.data(), static_cast<std::streamsize>(to.size()));
}

TEST_F(CheckpointTest, MetadataEditedInPlaceIsAnErrorAndResumeFallsBack) {
  CheckpointDir d(dir_ + "/checkpoints");
  d.prepare();
  for (int64_t s : {4, 12}) {
    write_sgd(d.file_for(s), static_cast<int>(s));
    d.commit(s, 3);
  }
  // "step": "12" -> "19": the tensors' CRCs still match; the metadata's CRC does not.
  edit_in_place(d.file_for(12), "\"step\":\"12\"", "\"step\":\"19\"");
  auto g = make_model(5);
  auto opt = optim::make_sgd(g->num_parameters(), {0.9, 0, 0, false});
  EXPECT_THAT(error_of([&] { load_checkpoint(d.file_for(12), *g, *opt); }),
              HasSubstr("checkpoint '" + d.file_for(12) + "': its metadata fails its CRC-32C check (stored "));
  EXPECT_THAT(error_of([&] { read_checkpoint_meta(SafetensorsFile::open(d.file_for(12))); }),
              HasSubstr("changed after it was written (edited by hand, or damaged)"));
  auto r = resume_latest(d, *g, *opt);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->meta.step, 4);
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_THAT(r->skipped[0].reason, HasSubstr("its metadata fails its CRC-32C check"));
}

TEST_F(CheckpointTest, ImpossibleSamplerPositionIsAnError) {
  // Written with a valid CRC: the values themselves must make sense.
  const std::string path = dir_ + "/big.safetensors";
  auto g = make_model(1);
  auto opt = optim::make_sgd(g->num_parameters(), {0.9, 0, 0, false});
  CheckpointMeta m = meta_for(1, *opt);
  m.epoch_samples = 999999999999;
  write_checkpoint(path, *g, *opt, m);
  EXPECT_EQ(error_of([&] { load_checkpoint(path, *g, *opt); }),
            "checkpoint '" + path + "': metadata epoch_samples = 999999999999 is more than the 500 samples of an "
            "epoch (sampler dataset_size): the file is damaged or was edited");
}

}  // namespace
}  // namespace dp
