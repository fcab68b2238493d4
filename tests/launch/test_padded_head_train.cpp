// Issue 30 through the real trainer on the CPU: a language model whose head pads its logits rows
// (linear's pad_out_to: V = 256 byte classes in rows of 300) trains, evaluates and counts token accuracy
// exactly as the same model unpadded: the training loop's loss and hits and the evaluation take
// models::output_width's V classes, never the padding (train_session.cpp, evaluate.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launch/train_session.h"
#include "runtime/config.h"
#include "runtime/data/byte_shards.h"
#include "tests/launch/token_shards.h"

namespace dp::launch {
namespace {

void make_shards(const std::string& dir) { testutil::make_word_shards(dir, 200); }

// Embedding -> linear head over byte tokens (V = 256), the head's rows padded to pad_out_to.
Config padded_lm(const std::string& dir, int pad_out_to) {
  const std::string text =
      "[run]\nname = \"p" + std::to_string(pad_out_to) + "\"\ndir = \"" + dir +
      "\"\nseed = 3\nlog_level = \"warn\"\ntensorboard = false\n"
      "[data]\ndataset = \"tokens\"\npath = \"" + dir + "/shards/train_*.bin\"\nval_path = \"" + dir +
      "/shards/val_*.bin\"\n"
      "[model]\nblock_size = 8\nvocab_size = 256\n"
      "[[layer]]\ntype = \"embedding\"\nname = \"wte\"\nnum_embeddings = 256\nembedding_dim = 16\n"
      "[[layer]]\ntype = \"linear\"\nname = \"head\"\nout_features = 256\nbias = false\npad_out_to = " +
      std::to_string(pad_out_to) +
      "\n[train]\noptimizer = \"adamw\"\nlr = 0.01\nbatch_size = 8\nsteps = 6\nlog_every = 1\neval_every = 3\n"
      "[checkpoint]\nfinal = false\n";
  return parse_config(text, "padded.cfg", {});
}

std::vector<nlohmann::json> metrics(const std::string& run) {
  std::vector<nlohmann::json> out;
  std::ifstream f(run + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(PaddedHeadTrain, APaddedHeadTrainsAndEvaluatesAsTheUnpaddedOne) {
  testutil::TempRunRoot r("padded_head");
  make_shards(r.path);
  const TrainResult plain = train(padded_lm(r.path, 1)), padded = train(padded_lm(r.path, 100));
  ASSERT_EQ(padded.steps, 6);
  ASSERT_GT(padded.final_eval.positions, 0);
  EXPECT_EQ(padded.final_eval.loss, plain.final_eval.loss);
  EXPECT_EQ(padded.final_eval.top1, plain.final_eval.top1);
  EXPECT_EQ(padded.final_eval.top5, plain.final_eval.top5);
  const auto a = metrics(plain.run_dir), b = metrics(padded.run_dir);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].contains("loss")) << a[i].dump();
    EXPECT_EQ(a[i]["loss"].get<double>(), b[i]["loss"].get<double>()) << a[i].dump();
    for (const char* key : {"top1", "accuracy", "top5"}) {
      if (!a[i].contains(key)) continue;
      EXPECT_EQ(a[i][key], b[i][key]) << key << " in " << a[i].dump();
    }
  }
}

}  // namespace
}  // namespace dp::launch
