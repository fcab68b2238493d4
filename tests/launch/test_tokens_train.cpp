// Training language models on token shards (data.dataset = "tokens") through the real trainer, with
// a test-only bigram model (tests/launch/token_test_model.h): it learns from byte-level shards; the
// metrics are per token (tokens_per_s, token accuracy, ppl, the eval's token count); the evaluation
// loss is the mean cross-entropy over every position, and sharded over 2 ranks it equals 1 rank's;
// 2 ranks equal 1 rank at twice the batch with clipping on, replicas identical; a stopped and
// resumed run is bitwise the straight one. The same through dptrain's GPT models, and against
// PyTorch: tests/oracle/test_gpt_train_torch.py and tests/integration/test_gpt_tiny.sh.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "collectives/bootstrap/factory.h"
#include "collectives/bootstrap/job_token.h"
#include "collectives/make_communicator.h"
#include "launch/datasets.h"
#include "launch/evaluate.h"
#include "launch/train_session.h"
#include "models/build.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/config.h"
#include "runtime/data/byte_shards.h"
#include "tests/collectives/multiproc.h"
#include "tests/launch/token_shards.h"
#include "tests/launch/token_test_model.h"

namespace dp::launch {
namespace {

constexpr int64_t kT = 16;

using testutil::make_word_shards;
struct Root : testutil::TempRunRoot {  // Root("learn"): <temp>/dptrain_tokens_learn_<pid>
  explicit Root(const std::string& tag) : TempRunRoot("tokens_" + tag) {}
};
void make_shards(const std::string& dir) { make_word_shards(dir, 400); }

std::string cfg_text(const std::string& root, const std::string& extra = "") {
  return "[run]\nname = \"lm\"\ndir = \"" + root + "\"\nseed = 3\nlog_level = \"warn\"\ntensorboard = false\n"
         "[data]\ndataset = \"tokens\"\npath = \"" + root + "/shards/train_*.bin\"\nval_path = \"" + root +
         "/shards/val_*.bin\"\n[model]\nblock_size = " + std::to_string(kT) +
         "\nvocab_size = 256\n[[layer]]\ntype = \"test_bigram\"\nname = \"bigram\"\nvocab = 256\n"
         "[train]\noptimizer = \"adamw\"\nlr = 0.05\nbatch_size = 8\nsteps = 30\nlog_every = 10\nweight_decay = 0.01\n"
         "decay_params = \"matrices\"\n" + extra;
}

Config cfg_of(const std::string& root, const std::vector<std::string>& sets = {}, const std::string& extra = "") {
  testing_tokens::register_test_bigram();
  return parse_config(cfg_text(root, extra), "lm.cfg", sets);
}

std::vector<nlohmann::json> metrics(const std::string& run) {
  std::vector<nlohmann::json> out;
  std::ifstream f(run + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::string tensor_bytes(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  std::string out;
  for (const auto& name : f.names()) {
    Tensor t = f.get(name);
    out += name + ":" + std::string(static_cast<const char*>(t.raw()), t.nbytes()) + ";";
  }
  return out;
}

double max_abs_diff(const std::string& a, const std::string& b) {
  SafetensorsFile fa = SafetensorsFile::open(a), fb = SafetensorsFile::open(b);
  double d = 0;
  for (const auto& name : fa.names()) {
    Tensor x = fa.get(name), y = fb.get(name);
    for (int64_t i = 0; i < x.numel(); ++i)
      d = std::max(d, std::fabs(static_cast<double>(x.data<float>()[i]) - y.data<float>()[i]));
  }
  return d;
}

TEST(TokensTrain, ABigramModelLearnsFromByteShardsAndReportsPerTokenMetrics) {
  Root r("learn");
  make_shards(r.path);
  const TrainResult res = train(cfg_of(r.path, {"train.grad_clip=1.0", "data.eval_limit=20"}));
  ASSERT_EQ(res.steps, 30);
  EXPECT_TRUE(res.final_eval.tokens);
  EXPECT_EQ(res.final_eval.samples, 20);  // data.eval_limit windows
  EXPECT_EQ(res.final_eval.positions, 20 * kT);
  EXPECT_LT(res.final_eval.loss, 2.5) << "ln 256 = 5.55 at the start";
  EXPECT_GT(res.final_eval.top1, 0.3) << "token accuracy";
  const auto lines = metrics(res.run_dir);
  int train_lines = 0, eval_lines = 0;
  for (const auto& j : lines) {
    if (j["split"] == "train") {
      ++train_lines;
      EXPECT_EQ(j["accuracy_over"], "tokens");
      EXPECT_NEAR(j["tokens_per_s"].get<double>(), j["samples_per_s"].get<double>() * kT,
                  1e-9 * j["tokens_per_s"].get<double>());
      EXPECT_GT(j["grad_norm"].get<double>(), 0.0);  // clipping is on: the norm is logged
      EXPECT_GE(j["accuracy"].get<double>(), 0.0);   // hits over positions, not windows
      EXPECT_LE(j["accuracy"].get<double>(), 1.0);
    }
    if (j["split"] == "eval") {
      ++eval_lines;
      EXPECT_DOUBLE_EQ(j["ppl"].get<double>(), std::exp(j["loss"].get<double>()));
      EXPECT_EQ(j["tokens"], 20 * kT);
      EXPECT_EQ(j["accuracy_over"], "tokens");
    }
  }
  EXPECT_EQ(train_lines, 3);
  EXPECT_EQ(eval_lines, 1);
}

// The model's evaluation loss against the mean over every position computed here in double:
// -log softmax(weight[x] + bias)[y] for each of the windows' T positions.
TEST(TokensTrain, TheEvaluationLossIsTheMeanCrossEntropyOverEveryPosition) {
  Root r("evalloss");
  make_shards(r.path);
  const Config cfg = cfg_of(r.path, {"train.batch_size=5"});
  const Datasets ds = open_datasets(cfg.data, "", token_windows_of(cfg.model));
  auto model = models::build_model(cfg.model, ds.train.dataset->sample_shape(), 11);
  auto boot = make_bootstrap("single", 10);
  auto comm = make_communicator(CollectiveBackend::Ring, *boot, 10);
  models::SoftmaxCrossEntropy loss;
  const EvalResult e = evaluate(*model, loss, ds.eval, cfg, 0, *comm);
  const float* w = model->params().tensor(0).data<float>();
  const float* b = model->params().tensor(1).data<float>();
  double sum = 0, hits = 0;
  int64_t n = 0;
  std::vector<uint16_t> win(kT + 1);
  for (int64_t i : ds.eval.indices) {
    ds.eval.dataset->get_tokens(i, win.data());
    for (int64_t t = 0; t < kT; ++t, ++n) {
      const float* z = w + win[t] * 256;
      double m = -1e30, se = 0;
      for (int k = 0; k < 256; ++k) m = std::max(m, static_cast<double>(z[k] + b[k]));
      for (int k = 0; k < 256; ++k) se += std::exp(static_cast<double>(z[k] + b[k]) - m);
      sum += m + std::log(se) - static_cast<double>(z[win[t + 1]] + b[win[t + 1]]);
      int higher = 0;
      for (int k = 0; k < 256; ++k) higher += z[k] + b[k] > z[win[t + 1]] + b[win[t + 1]];
      hits += higher == 0;
    }
  }
  EXPECT_EQ(e.samples, static_cast<int64_t>(ds.eval.indices.size()));
  EXPECT_EQ(e.positions, n);
  EXPECT_NEAR(e.loss, sum / static_cast<double>(n), 1e-6);
  EXPECT_DOUBLE_EQ(e.top1, hits / static_cast<double>(n));
}

// Sets the torchrun variables of rank r of n in this (forked) process, for dist.bootstrap = "env".
void join_as(int rank, int n, int port, const std::string& token) {
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("DPTRAIN_JOB_TOKEN", token.c_str(), 1);
}

// The evaluation windows sharded over 2 ranks (r, r + 2, ...; sums all-reduced) give one process's
// loss and accuracy.
TEST(TokensTrain, EvaluationOnTwoRanksEqualsOneRank) {
  Root r("eval2");
  make_shards(r.path);
  const Config cfg = cfg_of(r.path, {"train.batch_size=3"});
  const Datasets ds = open_datasets(cfg.data, "", token_windows_of(cfg.model));
  auto evaluate_on = [&](Bootstrap& boot) {
    auto model = models::build_model(cfg.model, ds.train.dataset->sample_shape(), 11);
    auto comm = make_communicator(CollectiveBackend::Ring, boot, 30);
    models::SoftmaxCrossEntropy loss;
    return evaluate(*model, loss, ds.eval, cfg, 0, *comm);
  };
  auto single = make_bootstrap("single", 10);
  const EvalResult one = evaluate_on(*single);
  const int port = testing_mp::free_port();
  const std::string token = make_job_token();
  const auto res = testing_mp::run_world(2, [&](int rank, std::string& report) {
    omp_set_num_threads(1);  // a fork of this process, without its OpenMP pool
    join_as(rank, 2, port, token);
    auto boot = make_bootstrap("env", 30);
    const EvalResult e = evaluate_on(*boot);
    report = fmt::format("{:.17g} {:.17g} {} {}", e.loss, e.top1, e.samples, e.positions);
    return 0;
  }, 60);
  for (const auto& c : res) {
    ASSERT_EQ(c.status, 0) << c.message;
    double loss = 0, top1 = 0;
    int64_t samples = 0, positions = 0;
    std::istringstream(c.message) >> loss >> top1 >> samples >> positions;
    EXPECT_NEAR(loss, one.loss, 1e-12 * one.loss);
    EXPECT_EQ(top1, one.top1);
    EXPECT_EQ(samples, one.samples);
    EXPECT_EQ(positions, one.positions);
  }
}

// 2 ranks at batch b equal 1 rank at batch 2b over 20 steps with clipping on (every rank clips
// the same all-reduced gradients), and the two replicas are identical bit for bit.
TEST(TokensTrain, TwoRanksEqualOneRankAtTwiceTheBatchWithClippingReplicasIdentical) {
  Root r("ddp");
  make_shards(r.path);
  // One OpenMP thread: the children are forks of this process, whose OpenMP pool they do not have.
  const std::vector<std::string> common = {"train.steps=20", "train.grad_clip=0.1", "train.lr=0.01",
                                           "checkpoint.replicas=true", "train.threads=1"};
  auto sets = [&](const std::string& dir, int batch, const std::string& boot) {
    std::vector<std::string> s = common;
    s.push_back("run.dir=\"" + dir + "\"");
    s.push_back("train.batch_size=" + std::to_string(batch));
    s.push_back("dist.bootstrap=\"" + boot + "\"");
    return s;
  };
  const TrainResult one = train(cfg_of(r.path, sets(r.path + "/one", 8, "single")));
  const int port = testing_mp::free_port();
  const std::string token = make_job_token();
  const auto res = testing_mp::run_world(2, [&](int rank, std::string&) {
    join_as(rank, 2, port, token);
    train(cfg_of(r.path, sets(r.path + "/two", 4, "env")));
    return 0;
  }, 120);
  for (const auto& c : res) ASSERT_EQ(c.status, 0) << c.message;
  for (const auto& j : metrics(one.run_dir))
    if (j["split"] == "train") {
      EXPECT_GT(j["grad_norm"].get<double>(), 0.1) << "the clip must act: " << j.dump();
    }
  EXPECT_LE(max_abs_diff(one.run_dir + "/final.safetensors", r.path + "/two/lm/final.safetensors"), 1e-5);
  EXPECT_EQ(tensor_bytes(r.path + "/two/lm/replicas/replica-rank0.safetensors"),
            tensor_bytes(r.path + "/two/lm/replicas/replica-rank1.safetensors"));
}

// A run stopped after step 7 and resumed to 15 ends with the weights of the straight 15-step run,
// bit for bit (the windows' order is a function of the seed and the epoch).
TEST(TokensTrain, StopAndResumeIsBitwiseTheStraightRun) {
  Root r("resume");
  make_shards(r.path);
  const std::vector<std::string> common = {"train.steps=15", "train.grad_clip=0.5", "checkpoint.every_steps=5"};
  auto with_dir = [&](const std::string& d) {
    std::vector<std::string> s = common;
    s.push_back("run.dir=\"" + d + "\"");
    return s;
  };
  const TrainResult straight = train(cfg_of(r.path, with_dir(r.path + "/a")));
  const TrainResult stopped = train(cfg_of(r.path, with_dir(r.path + "/b")), TrainOptions{.stop_after_steps = 7});
  ASSERT_EQ(stopped.steps, 7);
  const TrainResult resumed = train(cfg_of(r.path, with_dir(r.path + "/b")));
  EXPECT_EQ(resumed.resumed_from_step, 7);
  EXPECT_EQ(tensor_bytes(straight.run_dir + "/final.safetensors"), tensor_bytes(resumed.run_dir + "/final.safetensors"));
}

// A model whose output is not per-position scores [T, V] is refused before training.
TEST(TokensTrain, AModelWithoutPerPositionScoresIsRefused) {
  Root r("shape");
  make_shards(r.path);
  try {
    train(cfg_of(r.path, {"model.vocab_size=300"}));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "the model's output has per-sample shape [16, 256]; token windows need scores per position "
                           "[T, V] = [16, 300] (model.block_size, model.vocab_size): a language model's logits");
  }
}

}  // namespace
}  // namespace dp::launch
