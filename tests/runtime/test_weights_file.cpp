// Weights from a file (runtime/checkpoint/weights_file.h): the pure matching (names, dtypes,
// shapes, skip globs) and load_weights on a real model from the three kinds of file: a plain
// state_dict, dptrain's final weights, a dptrain checkpoint (optimizer state ignored, CRCs
// checked). Every mismatch is one error naming each tensor, expected vs found; a failed load
// changes nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "models/build.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/weights_file.h"
#include "runtime/optim/sgd.h"

namespace dp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(WeightsPlan, NamesEveryMismatchExpectedVsFound) {
  const std::vector<TensorSig> model = {{"a", DType::F32, {2, 3}},
                                        {"b", DType::F32, {3}},
                                        {"bn.running_mean", DType::F32, {3}},
                                        {"bn.num_batches_tracked", DType::I64, {}}};
  const std::vector<TensorSig> file = {
      {"a", DType::F32, {2, 3}}, {"b", DType::F16, {4}}, {"bn.running_mean", DType::F32, {3}}, {"c", DType::F32, {1}}};
  const WeightsPlan p = plan_weights_load(model, file, {});
  EXPECT_EQ(p.load, (std::vector<std::string>{"a", "bn.running_mean"}));
  EXPECT_EQ(p.problems, (std::vector<std::string>{"'b': the model has f32[3], the file f16[4]",
                                                  "'bn.num_batches_tracked' (i64[]): in the model, not in the file",
                                                  "'c' (f32[1]): in the file, not in the model"}));
  const WeightsPlan s = plan_weights_load(model, file, {"b", "c*", "bn.num_*", "zz.*"});
  EXPECT_EQ(s.load, (std::vector<std::string>{"a", "bn.running_mean"}));
  EXPECT_EQ(s.skipped, (std::vector<std::string>{"b", "bn.num_batches_tracked"}));
  EXPECT_EQ(s.unused, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(s.problems, (std::vector<std::string>{"skip pattern 'zz.*' matches no tensor"}));
}

// A tied parameter (lm_head.weight is transformer.wte.weight) comes from either name or both; an
// owner skipped skips its alias; a missing pair is one problem, the owner's.
TEST(WeightsPlan, TiedParameterFromEitherNameOrBoth) {
  const std::vector<TensorSig> model = {{"wte", DType::F32, {5, 2}}, {"ln", DType::F32, {2}},
                                        {"head", DType::F32, {5, 2}, "wte"}};
  const TensorSig wte{"wte", DType::F32, {5, 2}}, ln{"ln", DType::F32, {2}}, head{"head", DType::F32, {5, 2}};
  EXPECT_EQ(plan_weights_load(model, {wte, ln, head}, {}).load, (std::vector<std::string>{"wte", "ln", "head"}));
  const WeightsPlan owner_only = plan_weights_load(model, {wte, ln}, {});
  EXPECT_EQ(owner_only.load, (std::vector<std::string>{"wte", "ln"}));
  EXPECT_TRUE(owner_only.problems.empty());
  const WeightsPlan alias_only = plan_weights_load(model, {ln, head}, {});
  EXPECT_EQ(alias_only.load, (std::vector<std::string>{"ln", "head"}));
  EXPECT_TRUE(alias_only.problems.empty());
  EXPECT_EQ(plan_weights_load(model, {ln}, {}).problems,
            (std::vector<std::string>{"'wte' (f32[5, 2]): in the model, not in the file"}));
  const WeightsPlan skipped = plan_weights_load(model, {wte, ln, head}, {"wte"});
  EXPECT_EQ(skipped.load, (std::vector<std::string>{"ln"}));
  EXPECT_EQ(skipped.skipped, (std::vector<std::string>{"wte", "head"}));
  EXPECT_EQ(skipped.unused, (std::vector<std::string>{"wte", "head"}));
  EXPECT_EQ(plan_weights_load(model, {wte, ln, {"head", DType::F32, {2, 5}}}, {}).problems,
            (std::vector<std::string>{"'head': the model has f32[5, 2], the file f32[2, 5]"}));
}

TEST(WeightsPlan, TranslationRenamesTransposesAndIgnores) {
  WeightsTranslation t;
  t.rename = {{"h.0.w", "transformer.h.0.w"}};
  t.transpose = {"h.0.w"};
  t.ignore = {"h.0.attn.bias"};
  const std::vector<TensorSig> got =
      translate_sigs({{"h.0.w", DType::F32, {2, 6}}, {"h.0.attn.bias", DType::F32, {1, 1, 4, 4}}, {"x", DType::I64, {}}}, t);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "transformer.h.0.w");
  EXPECT_EQ(got[0].shape, (Shape{6, 2}));
  EXPECT_EQ(got[1].name, "x");
}

// The cnn preset (conv, BN with running statistics and num_batches_tracked, two linear layers).
std::unique_ptr<Graph> cnn(int64_t classes, uint64_t seed) {
  ModelConfig mc;
  mc.preset = PresetKind::Cnn;
  mc.num_classes = classes;
  return models::build_model(mc, {1, 8, 8}, seed);
}

std::vector<std::pair<std::string, Tensor>> state_of(const Graph& g) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& nt : g.state()) out.emplace_back(nt.name, nt.tensor.clone());
  return out;
}

bool equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

class WeightsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dptrain_weights_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(WeightsFile, StateDictWithANewHead) {
  auto src = cnn(10, 1);
  write_safetensors(path("sd.safetensors"), state_of(*src));  // no metadata: a plain state_dict
  auto fresh = cnn(4, 2);
  const auto before = state_of(*fresh);
  const WeightsLoad w = load_weights(path("sd.safetensors"), *fresh, {"fc2.*"}, "hint");
  EXPECT_EQ(w.kind, WeightsKind::StateDict);
  EXPECT_EQ(w.plan.skipped, (std::vector<std::string>{"fc2.weight", "fc2.bias"}));
  const auto got = fresh->state(), want = src->state();
  for (size_t i = 0; i < got.size(); ++i) {
    const bool skipped = got[i].name.rfind("fc2.", 0) == 0;
    EXPECT_TRUE(equal(got[i].tensor, skipped ? before[i].second : want[i].tensor)) << got[i].name;
  }
}

TEST_F(WeightsFile, MismatchesAreOneErrorAndChangeNothing) {
  auto src = cnn(10, 1);
  write_safetensors(path("sd.safetensors"), state_of(*src));
  auto fresh = cnn(4, 2);
  const auto before = state_of(*fresh);
  try {
    load_weights(path("sd.safetensors"), *fresh, {}, "Use model.init_skip.");
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "weights '" + path("sd.safetensors") +
                  "' (state_dict) do not fit the model: 2 problems: 'fc2.weight': the model has f32[4, 128], the file "
                  "f32[10, 128]; 'fc2.bias': the model has f32[4], the file f32[10]. Use model.init_skip.");
  }
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(equal(fresh->state()[i].tensor, before[i].second));
}

TEST_F(WeightsFile, FinalWeightsAndCheckpointsLoadTheirModelTensors) {
  auto src = cnn(4, 1);
  write_safetensors(path("final.safetensors"), state_of(*src), {{"format", "dptrain-weights"}});
  auto opt = optim::make_sgd(src->num_parameters(), optim::SgdOptions{});
  CheckpointMeta m;
  m.optimizer = opt->name();
  write_checkpoint(path("ckpt.safetensors"), *src, *opt, m);
  for (const std::string f : {"final.safetensors", "ckpt.safetensors"}) {
    auto g = cnn(4, 2);
    const WeightsLoad w = load_weights(path(f), *g, {}, "");
    EXPECT_EQ(w.kind, f == "ckpt.safetensors" ? WeightsKind::DptrainCheckpoint : WeightsKind::DptrainWeights);
    EXPECT_EQ(w.plan.load.size(), src->state().size()) << f;
    for (size_t i = 0; i < g->state().size(); ++i) EXPECT_TRUE(equal(g->state()[i].tensor, src->state()[i].tensor));
  }
  // A flipped byte in a checkpoint's tensor: its CRC names it.
  SafetensorsFile sf = SafetensorsFile::open(path("ckpt.safetensors"));
  const auto& info = sf.info("conv1.weight");
  uint64_t header = 0;
  std::fstream io(path("ckpt.safetensors"), std::ios::binary | std::ios::in | std::ios::out);
  io.read(reinterpret_cast<char*>(&header), 8);
  io.seekp(static_cast<std::streamoff>(8 + header + info.begin));
  io.put('\x7f');
  io.close();
  auto g = cnn(4, 2);
  try {
    load_weights(path("ckpt.safetensors"), *g, {}, "");
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("are corrupt: tensor 'conv1.weight' fails its CRC-32C check"));
  }
}

// A GPT's final weights hold the tied parameter under both names; a file with only one of them
// loads too, and one with different values under the two is an error that changes nothing.
TEST_F(WeightsFile, TiedParameterLoadsFromEitherNameAndDifferentValuesAreAnError) {
  ModelConfig mc;
  mc.preset = PresetKind::Gpt2;
  mc.n_layer = 1, mc.n_head = 2, mc.n_embd = 8, mc.block_size = 4, mc.vocab_size = 11;
  auto src = models::build_model(mc, {4}, 1);
  auto all = state_of(*src);
  ASSERT_EQ(all.back().first, "lm_head.weight");
  write_safetensors(path("both.safetensors"), all);
  auto without = [&](const std::string& name) {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& [n, t] : all)
      if (n != name) out.emplace_back(n, t);
    return out;
  };
  write_safetensors(path("wte.safetensors"), without("lm_head.weight"));
  write_safetensors(path("head.safetensors"), without("transformer.wte.weight"));
  for (const std::string f : {"both.safetensors", "wte.safetensors", "head.safetensors"}) {
    auto g = models::build_model(mc, {4}, 2);
    load_weights(path(f), *g, {}, "");
    for (size_t i = 0; i < g->state().size(); ++i)
      EXPECT_TRUE(equal(g->state()[i].tensor, src->state()[i].tensor)) << f << " " << g->state()[i].name;
  }
  all.back().second.data<float>()[3] += 1.0f;
  write_safetensors(path("differ.safetensors"), all);
  auto g = models::build_model(mc, {4}, 2);
  const auto before = state_of(*g);
  try {
    load_weights(path("differ.safetensors"), *g, {}, "");
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "weights '" + path("differ.safetensors") +
                  "': 'lm_head.weight' and 'transformer.wte.weight' are one tied parameter in this model, but the "
                  "file holds different values for them; keep one of them in the file (either is enough) or make "
                  "them equal");
  }
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(equal(g->state()[i].tensor, before[i].second));
}

// A GPT checkpoint (both names of the tied parameter, its optimizer state once) restores the
// model and AdamW bit for bit, so a resumed run continues where it stopped.
TEST_F(WeightsFile, GptCheckpointRoundTripsBitwise) {
  ModelConfig mc;
  mc.preset = PresetKind::Gpt2;
  mc.n_layer = 1, mc.n_head = 2, mc.n_embd = 8, mc.block_size = 4, mc.vocab_size = 11;
  auto src = models::build_model(mc, {4}, 1);
  auto opt = optim::make_adamw(src->num_parameters(), {});
  float* gr = src->grads().flat().data<float>();
  for (int64_t i = 0; i < src->grads().flat().numel(); ++i) gr[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  opt->step(src->params().flat(), src->grads().flat(), 1e-2);
  CheckpointMeta m;
  m.optimizer = opt->name();
  m.optimizer_steps = opt->steps();
  write_checkpoint(path("gpt.safetensors"), *src, *opt, m);
  const auto names = SafetensorsFile::open(path("gpt.safetensors")).names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "lm_head.weight"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "optim.transformer.wte.weight.exp_avg"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "optim.lm_head.weight.exp_avg"), 0);
  auto g = models::build_model(mc, {4}, 2);
  auto opt2 = optim::make_adamw(g->num_parameters(), {});
  load_checkpoint(path("gpt.safetensors"), *g, *opt2);
  EXPECT_TRUE(equal(g->params().flat(), src->params().flat()));
  for (size_t i = 0; i < opt->state().size(); ++i)
    EXPECT_TRUE(equal(opt2->state()[i].second, opt->state()[i].second)) << opt->state()[i].first;
  EXPECT_EQ(opt2->steps(), 1);
}

}  // namespace
}  // namespace dp
