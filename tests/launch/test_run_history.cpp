// What a run directory keeps across attempts (launch/run_history.h): a resume writes no metrics
// line twice (the lines of redone steps go, an evaluation already logged is not logged again, a
// finished run resumed appends nothing); --reset moves the earlier run's metrics, event files and
// final weights aside into before-reset-<time>/ and starts clean files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "launch/run_history.h"
#include "launch/train_session.h"
#include "runtime/config.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

using dp::testutil::read_file;
namespace fs = std::filesystem;

TEST(RunHistory, TrimKeepsTheLinesUpToTheStep) {
  const std::string text =
      "{\"split\":\"train\",\"step\":5}\n{\"split\":\"train\",\"step\":10}\n{\"split\":\"eval\",\"step\":10}\n"
      "{\"split\":\"train\",\"step\":15}\n{\"split\":\"device\",\"peak\":1}\nnot json\n{\"split\":\"eval\",\"step\":20}";
  const MetricsTrim t = trim_metrics(text, 10);
  EXPECT_EQ(t.kept,
            "{\"split\":\"train\",\"step\":5}\n{\"split\":\"train\",\"step\":10}\n{\"split\":\"eval\",\"step\":10}\n"
            "{\"split\":\"device\",\"peak\":1}\nnot json\n");
  EXPECT_EQ(t.dropped, 2);
  EXPECT_TRUE(t.eval_at_step);
  EXPECT_FALSE(trim_metrics(text, 12).eval_at_step);
  EXPECT_EQ(trim_metrics(text, 100).dropped, 0);
}

std::string temp_root(const std::string& tag) { return testutil::temp_root("history", tag); }

// 200 synthetic samples at 16 per step (13 steps per epoch), 20 steps; a train line every 5
// steps, an evaluation every 10: metrics.jsonl holds train 5, 10, eval 10, train 15, 20, eval 20.
Config cfg_of(const std::string& root, std::vector<std::string> sets = {}) {
  sets.push_back("run.dir=\"" + root + "\"");
  return parse_config(
      "[run]\nname = \"h\"\nlog_level = \"warn\"\n[data]\ndataset = \"synthetic\"\nsynthetic_shape = [1, 6, 6]\n"
      "synthetic_train = 200\nsynthetic_eval = 32\nmean = [0.5]\nstd = [0.25]\n[model]\npreset = \"mlp\"\n"
      "hidden = [16]\n[train]\nsteps = 20\nbatch_size = 16\nlog_every = 5\neval_every = 10\nthreads = 1\n",
      "h.cfg", sets);
}

// "train 5", "eval 10", ... : each line's split and step.
std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) {
    const auto j = nlohmann::json::parse(l);
    out.push_back(j.value("split", "?") + " " + std::to_string(j.value("step", -1)));
  }
  return out;
}

const std::vector<std::string> kStraight = {"train 5", "train 10", "eval 10", "train 15", "train 20", "eval 20"};

TEST(RunHistory, AResumeWritesNoLineTwice) {
  const std::string root = temp_root("resume");
  const std::string metrics = root + "/h/metrics.jsonl";
  TrainOptions stop;
  stop.stop_after_steps = 12;
  train(cfg_of(root), stop);
  ASSERT_EQ(lines_of(metrics), (std::vector<std::string>{"train 5", "train 10", "eval 10"}));
  // A run killed after its checkpoint at 12 may have logged steps it never checkpointed.
  std::ofstream(metrics, std::ios::app) << "{\"split\":\"train\",\"step\":13}\n";
  train(cfg_of(root));
  EXPECT_EQ(lines_of(metrics), kStraight);
  // The finished run resumed: it evaluates (and says so in the log) but appends nothing.
  TrainResult again = train(cfg_of(root));
  EXPECT_EQ(again.resumed_from_step, 20);
  EXPECT_EQ(lines_of(metrics), kStraight);
  fs::remove_all(root);
}

TEST(RunHistory, ResetMovesTheEarlierRunAsideAndStartsCleanFiles) {
  const std::string root = temp_root("reset");
  const std::string run = root + "/h";
  train(cfg_of(root));
  const std::string old_metrics = read_file(run + "/metrics.jsonl");
  std::vector<std::string> old_events;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) old_events.push_back(e.path().filename());
  ASSERT_EQ(old_events.size(), 1u);

  TrainOptions reset;
  reset.reset = true;
  train(cfg_of(root, {"train.steps=10"}), reset);
  EXPECT_EQ(lines_of(run + "/metrics.jsonl"), (std::vector<std::string>{"train 5", "train 10", "eval 10"}));
  std::vector<std::string> aside, events;
  for (const auto& e : fs::directory_iterator(run)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("before-reset-", 0) == 0) aside.push_back(n);
    if (n.rfind("events.out.tfevents.", 0) == 0) events.push_back(n);
  }
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(events.size(), 1u) << "only the new run's event file";
  const std::string moved = run + "/" + aside[0];
  EXPECT_EQ(read_file(moved + "/metrics.jsonl"), old_metrics) << "moved, not deleted";
  EXPECT_TRUE(fs::exists(moved + "/" + old_events[0]));
  EXPECT_TRUE(fs::exists(moved + "/final.safetensors"));
  EXPECT_TRUE(fs::exists(run + "/final.safetensors")) << "the new run's own";
  fs::remove_all(root);
}

}  // namespace
}  // namespace dp::launch
