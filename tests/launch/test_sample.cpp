// `dptrain sample` (launch/sample.h): the prompt's tokens, one draw (top-k, temperature, the
// inverse CDF), the generation loop (deterministic for a seed, a sliding window past block_size),
// and the command end to end on weights written by a GPT (its exact output twice, its errors).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launch/sample.h"
#include "models/build.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/launch/cli_capture.h"
#include "tests/error_text.h"

namespace dp::launch {
namespace {

namespace fs = std::filesystem;

using testutil::error_of;

TEST(SamplePrompt, BytesOrIdsAndTheirErrors) {
  SampleOptions o;
  o.prompt = "Hi\n";
  EXPECT_EQ(prompt_tokens(o, 256), (std::vector<int32_t>{72, 105, 10}));
  EXPECT_EQ(error_of([&] { prompt_tokens(o, 50257); }),
            "dptrain sample: --prompt is text, read as bytes, but this model's vocabulary is 50257 tokens, not 256 "
            "bytes; give the tokenizer's ids with --prompt-ids");
  o.prompt.clear();
  o.prompt_ids = "15496, 11 995";
  EXPECT_EQ(prompt_tokens(o, 50257), (std::vector<int32_t>{15496, 11, 995}));
  o.prompt_ids = "1, 2x";
  EXPECT_EQ(error_of([&] { prompt_tokens(o, 256); }),
            "dptrain sample: --prompt-ids: '2x' is not a token id in [0, 256) (model.vocab_size)");
  o.prompt_ids = "256";
  EXPECT_EQ(error_of([&] { prompt_tokens(o, 256); }),
            "dptrain sample: --prompt-ids: '256' is not a token id in [0, 256) (model.vocab_size)");
  o.prompt_ids.clear();
  EXPECT_EQ(error_of([&] { prompt_tokens(o, 256); }),
            "dptrain sample: give one of --prompt TEXT (a byte-level model, model.vocab_size = 256) or --prompt-ids "
            "\"id, id, ...\"");
}

TEST(SampleToken, TopKTemperatureAndTheInverseCdf) {
  const float z[] = {1.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(sample_token(z, 4, 0.0, 0, 0.7), 1);  // greedy: the lower id of the two maxima
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(sample_token(z, 4, 1.0, 1, u), 1);
  // temperature 1, all: p(1) = p(3) = e^3 / s, p(2) = e^2 / s, p(0) = e / s, s = e + e^2 + 2 e^3.
  const double s = std::exp(1.0) + std::exp(2.0) + 2 * std::exp(3.0), p3 = std::exp(3.0) / s;
  EXPECT_EQ(sample_token(z, 4, 1.0, 0, p3 - 1e-9), 1);
  EXPECT_EQ(sample_token(z, 4, 1.0, 0, p3 + 1e-9), 3);
  EXPECT_EQ(sample_token(z, 4, 1.0, 0, 2 * p3 + 1e-9), 2);
  EXPECT_EQ(sample_token(z, 4, 1.0, 0, 0.9999999), 0);
  // top-2 keeps ids 1 and 3 only, at 1/2 each.
  EXPECT_EQ(sample_token(z, 4, 1.0, 2, 0.49), 1);
  EXPECT_EQ(sample_token(z, 4, 1.0, 2, 0.51), 3);
  EXPECT_EQ(sample_token(z, 4, 1.0, 2, 0.9999999), 3);
}

ModelConfig tiny_gpt(int64_t block) {
  ModelConfig m;
  m.preset = PresetKind::Gpt2;
  m.n_layer = 2, m.n_head = 2, m.n_embd = 16, m.block_size = block, m.vocab_size = 256;
  return m;
}

TEST(SampleGenerate, DeterministicForASeedAndSlidingPastBlockSize) {
  auto g = models::build_model(tiny_gpt(8), {8}, 3);
  SampleOptions o;
  o.tokens = 13, o.samples = 2, o.seed = 5;
  const std::vector<int32_t> prompt = {65, 66, 67};
  const auto a = generate(*g, prompt, o), b = generate(*g, prompt, o);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[0].size(), 16u);
  EXPECT_EQ(std::vector<int32_t>(a[0].begin(), a[0].begin() + 3), prompt);
  EXPECT_NE(a[0], a[1]) << "two samples, two streams";
  o.seed = 6;
  EXPECT_NE(generate(*g, prompt, o), a);
  // Greedy: temperature 0 and top-k 1 agree, and no seed changes them.
  o.temperature = 0;
  const auto greedy = generate(*g, prompt, o);
  o.temperature = 1, o.top_k = 1, o.seed = 99;
  EXPECT_EQ(generate(*g, prompt, o), greedy);
  EXPECT_EQ(greedy[0], greedy[1]);
}

class SampleCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dptrain_sample_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto g = models::build_model(tiny_gpt(16), {16}, 7);
    std::vector<std::pair<std::string, Tensor>> state;
    for (const auto& nt : g->state()) state.emplace_back(nt.name, nt.tensor);
    write_safetensors((dir_ / "w.safetensors").string(), state, {{"format", "dptrain-weights"}});
    std::ofstream((dir_ / "m.cfg").string()) << "[model]\npreset = \"gpt2\"\nn_layer = 2\nn_head = 2\nn_embd = 16\n"
                                                "block_size = 16\nvocab_size = 256\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SampleCommand, SameSeedSameTextAndErrorsNameTheFix) {
  const std::vector<std::string> args = {"sample", (dir_ / "m.cfg").string(), "--weights",
                                         (dir_ / "w.safetensors").string(), "--prompt", "ROMEO:", "--tokens", "20",
                                         "--top-k", "40", "--seed", "3"};
  const auto a = testcli::dptrain_cli(args), b = testcli::dptrain_cli(args);
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.size(), 6u + 20u + 1u);  // the prompt, 20 bytes, a newline
  EXPECT_EQ(a.out.rfind("ROMEO:", 0), 0u);
  auto ids = args;
  ids[4] = "--prompt-ids", ids[5] = "1 2 300";
  const auto bad = testcli::dptrain_cli(ids);
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "dptrain: error: dptrain sample: --prompt-ids: '300' is not a token id in [0, 256) "
                     "(model.vocab_size)\n");
}

}  // namespace
}  // namespace dp::launch
