// data.dataset = "synthetic" for a language model: models/gpt_tiny.cfg (the gpt2 preset) at a tiny
// size trains on synthetic token windows on the CPU through the real trainer, as on token shards:
// per-token metrics, finite losses, and an evaluation loss at ln(vocab), the loss of random tokens;
// the same seed gives the same losses bit for bit. The cfg resolves for it: no normalisation by
// default, none allowed (the message names the data set); made on the GPU, no crop or flip.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "launch/datasets.h"
#include "launch/train_session.h"
#include "runtime/config.h"

namespace dp::launch {
namespace {

const std::string kGptTiny = std::string(DPTRAIN_SOURCE_DIR) + "/models/gpt_tiny.cfg";

struct Root {
  std::string path;
  Root() {
    path = (std::filesystem::temp_directory_path() / ("dptrain_synth_tokens_" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Root() { std::filesystem::remove_all(path); }
};

// gpt_tiny.cfg (vocabulary 256, dropout 0.1) at 2 layers, 2 heads, 32 dims, context 32: 12 steps
// of 8 windows over 96 training windows, then the final evaluation over the 32 after them.
Config tiny(const std::string& dir, const std::string& name, const std::vector<std::string>& more = {}) {
  std::vector<std::string> sets = {"data.dataset=synthetic", "data.synthetic_train=96", "data.synthetic_eval=32",
                                   "model.n_layer=2", "model.n_head=2", "model.n_embd=32", "model.block_size=32",
                                   "train.batch_size=8", "train.steps=12", "train.warmup_steps=2", "train.eval_every=0",
                                   "train.log_every=1", "run.log_level=warn", "run.tensorboard=false",
                                   "run.dir=\"" + dir + "\"", "run.name=" + name, "checkpoint.final=false"};
  sets.insert(sets.end(), more.begin(), more.end());
  return load_config(kGptTiny, sets);
}

std::vector<nlohmann::json> metrics(const std::string& run, const std::string& split) {
  std::vector<nlohmann::json> out;
  std::ifstream f(run + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("split", "") == split) out.push_back(j);
  }
  return out;
}

// Random tokens are not learnable: for held-out windows (the evaluation's are never trained on)
// any prediction q scores E[-ln q(y)] = ln V + KL(uniform || q) >= ln V, so the mean over the
// 32 x 32 = 1024 positions sits at ln 256 = 5.545 or above; its sampling noise is tiny for a q near
// uniform, which 12 steps from an initialisation of small logits keep. Bound: [ln V - 0.02, ln V +
// 0.1]. The same seed twice: the same training and evaluation losses, bit for bit.
TEST(SyntheticTokensTrain, TinyGptScoresTheLossOfRandomTokensAndTheSameSeedRepeatsIt) {
  Root r;
  const TrainResult a = train(tiny(r.path, "a")), b = train(tiny(r.path, "b"));
  const double ln_v = std::log(256.0);
  ASSERT_EQ(a.steps, 12);
  EXPECT_TRUE(a.final_eval.tokens);
  EXPECT_EQ(a.final_eval.samples, 32);
  EXPECT_EQ(a.final_eval.positions, 32 * 32);
  ASSERT_TRUE(std::isfinite(a.final_eval.loss));
  EXPECT_GT(a.final_eval.loss, ln_v - 0.02);
  EXPECT_LT(a.final_eval.loss, ln_v + 0.1);
  EXPECT_LT(a.final_eval.top1, 0.02) << "chance is 1/256";
  const auto ta = metrics(a.run_dir, "train"), tb = metrics(b.run_dir, "train");
  ASSERT_EQ(ta.size(), 12u);
  ASSERT_EQ(tb.size(), ta.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    EXPECT_TRUE(std::isfinite(ta[i]["loss"].get<double>())) << i;
    EXPECT_EQ(ta[i]["accuracy_over"], "tokens");
    EXPECT_EQ(ta[i]["loss"].get<double>(), tb[i]["loss"].get<double>()) << "step " << i + 1;
  }
  EXPECT_NEAR(ta.front()["loss"].get<double>(), ln_v, 0.1) << "the untrained model's loss";
  EXPECT_EQ(a.final_eval.loss, b.final_eval.loss);
  EXPECT_EQ(a.final_eval.top1, b.final_eval.top1);
}

TEST(SyntheticTokensTrain, TheCfgResolvesForTokenWindows) {
  Root r;
  const Config c = tiny(r.path, "cfg");
  EXPECT_TRUE(c.data.mean.empty() && c.data.std.empty());  // the default normalisation is not applied
  EXPECT_FALSE(c.data.hflip);
  const Datasets ds = open_datasets(c.data, "", token_windows_of(c.model));
  ASSERT_TRUE(ds.tokens());
  EXPECT_EQ(ds.train.dataset->describe(), "synthetic tokens (seed 12345): 128 windows of 32 + 1 tokens, vocabulary 256");
  EXPECT_EQ(ds.train.indices.size(), 96u);
  EXPECT_EQ(ds.eval.indices.front(), 96);
  try {
    const Config flip = tiny(r.path, "flip", {"data.hflip=true"});
    open_datasets(flip.data, "", token_windows_of(flip.model));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "data.mean, data.std, data.crop_padding and data.hflip do not apply to token windows "
                           "(data.dataset = \"synthetic\" for a model that takes tokens); leave them out of the cfg");
  }
  // Made on the GPU (data.synthetic_device = "cuda"): the cfg's checks hold for token windows too.
  EXPECT_EQ(tiny(r.path, "cuda", {"data.synthetic_device=cuda"}).data.synthetic_device, data::SyntheticDevice::Cuda);
  try {
    tiny(r.path, "cuda-flip", {"data.synthetic_device=cuda", "data.hflip=true"});
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              kGptTiny + ": data.synthetic_device = \"cuda\" makes batches without augmentation, but "
                         "data.crop_padding = 0 and data.hflip = true: set data.crop_padding = 0 and data.hflip = "
                         "false, or data.synthetic_device = \"cpu\"");
  }
}

}  // namespace
}  // namespace dp::launch
