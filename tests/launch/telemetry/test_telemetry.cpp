// What a 2-rank run reports besides its log, read back from its run directory: rank 0's
// TensorBoard event file (every CRC checked by the reader; the scalars equal metrics.jsonl's),
// and trace.json (per rank, per step of the window: data, forward, backward, optimizer and one
// all-reduce event per gradient bucket), plus the communication summary line. And the log
// window's sums and the log lines' durations, as pure functions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "launch/telemetry/telemetry.h"
#include "launch/telemetry/tensorboard_writer.h"
#include "tests/fashion_mnist.h"
#include "tests/launch/run_files.h"

namespace {

using dp::testutil::read_file;

namespace fs = std::filesystem;
const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";

TEST(Telemetry, TwoRanksWriteEventsTraceAndSummary) {
  SKIP_WITHOUT_FASHION_MNIST();
  const fs::path root = fs::temp_directory_path() / ("dptrain_telemetry_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string cmd = kBin + " --nproc 2 " + DPTRAIN_SOURCE_DIR + "/models/fmnist_mlp.cfg --run-dir " +
                          root.string() + dp::test::fashion_mnist_set() +
                          " --set train.steps=40 --set train.log_every=10 --set data.train_limit=4096"
                          " --set data.eval_limit=256 --set train.batch_size=16 --set model.hidden=[64,32]"
                          " --set dist.bucket_mb=0.001 --set dist.first_bucket_mb=0.001"
                          " --set profile.trace_steps=3-5 > " + (root / "out.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file((root / "out.log").string());
  const fs::path run = root / "fmnist_mlp";
  const std::string log0 = read_file((run / "logs/rank-0.log").string());

  // The bucket count the trainer announced.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log0, m, std::regex("gradient all-reduce: (\\d+) buckets"))) << log0;
  const int buckets = std::stoi(m[1]);
  ASSERT_GE(buckets, 3) << "small buckets give several";

  // metrics.jsonl (rank 0 only): train lines at steps 10..40, one eval line at the end.
  std::map<int64_t, double> loss, lr;
  double eval_top1 = -1;
  int lines = 0;
  std::ifstream metrics(run / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line); ++lines) {
    auto j = nlohmann::json::parse(line);
    if (j["split"] == "train") loss[j["step"]] = j["loss"], lr[j["step"]] = j["lr"];
    else eval_top1 = j["top1"];
  }
  EXPECT_EQ(lines, 5) << "4 train lines and 1 eval line, written once (by rank 0)";
  ASSERT_EQ(loss.size(), 4u);

  // The event file: every record's CRCs check out (read_event_file throws otherwise).
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u) << "rank 0 alone writes events";
  const auto events = dp::metrics::read_event_file(files[0].string());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  std::map<std::string, std::map<int64_t, float>> scalars;
  for (const auto& e : events)
    for (const auto& v : e.scalars) scalars[v.tag][e.step] = v.value;
  for (const auto& tag : {"train/loss", "train/accuracy", "train/lr", "perf/samples_per_s", "perf/step_ms",
                          "perf/comm_ms", "perf/comm_exposed_ms"}) {
    ASSERT_EQ(scalars[tag].size(), 4u) << tag;
    for (int64_t step : {10, 20, 30, 40}) EXPECT_TRUE(scalars[tag].count(step)) << tag << " at " << step;
  }
  for (const auto& [step, value] : loss) EXPECT_EQ(scalars["train/loss"][step], static_cast<float>(value)) << step;
  for (const auto& [step, value] : lr) EXPECT_EQ(scalars["train/lr"][step], static_cast<float>(value)) << step;
  ASSERT_EQ(scalars["eval/accuracy"].size(), 1u);
  EXPECT_EQ(scalars["eval/accuracy"][40], static_cast<float>(eval_top1));
  EXPECT_GT(scalars["perf/comm_ms"][40], 0.0f);

  // trace.json: for each rank, steps 3, 4, 5 (three of each phase, one per bucket and step).
  const auto trace = nlohmann::json::parse(read_file((run / "trace.json").string()));
  const auto& evs = trace.contains("traceEvents") ? trace["traceEvents"] : trace;
  std::map<std::pair<int, std::string>, int> count;
  std::set<int> named;
  for (const auto& e : evs) {
    if (e["ph"] == "X") {
      ++count[{e["pid"].get<int>(), e["name"].get<std::string>()}];
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    } else if (e["ph"] == "M" && e["name"] == "process_name") {
      named.insert(e["pid"].get<int>());
      EXPECT_EQ(e["args"]["name"], "rank " + std::to_string(e["pid"].get<int>()));
    }
  }
  EXPECT_EQ(named, (std::set<int>{0, 1}));
  for (int rank : {0, 1}) {
    for (const char* phase : {"data", "forward", "backward", "optimizer"})
      EXPECT_EQ((count[{rank, phase}]), 3) << "rank " << rank << " " << phase;
    for (int b = 0; b < buckets; ++b)
      EXPECT_EQ((count[{rank, "allreduce bucket " + std::to_string(b)}]), 3) << "rank " << rank << " bucket " << b;
  }
  size_t x_events = 0;
  for (const auto& [k, v] : count) x_events += v;
  EXPECT_EQ(x_events, static_cast<size_t>(2 * 3 * (4 + buckets))) << "nothing outside the window";

  // The summary of exposed vs hidden communication at the end.
  EXPECT_TRUE(std::regex_search(log0, std::regex("communication over 40 steps: [0-9.]+ ms/step, [0-9.]+ hidden "
                                                 "behind compute \\([0-9.]+%\\), [0-9.]+ exposed")))
      << log0;
  fs::remove_all(root);
}

TEST(LogWindow, SumsLossOverSamplesAndTimesOverSteps) {
  dp::launch::LogWindow w;
  w.add({.loss = 2.0, .samples = 10, .top1 = 3, .step_s = 0.5, .comm_s = 0.25, .exposed_s = 0.125});
  w.add({.loss = 1.0, .samples = 30, .top1 = 20, .step_s = 1.5, .comm_s = 0.75, .exposed_s = 0.375});
  EXPECT_EQ(w.samples, 40);
  EXPECT_EQ(w.hits, 23);
  EXPECT_EQ(w.steps, 2);
  EXPECT_DOUBLE_EQ(w.loss / w.samples, 50.0 / 40);  // the mean over samples, not over steps
  EXPECT_DOUBLE_EQ(w.step_s, 2.0);
  EXPECT_DOUBLE_EQ(w.comm_s, 1.0);
  EXPECT_DOUBLE_EQ(w.exposed_s, 0.5);
}

// Token windows: hits are counted over positions (samples x T), so the accuracy divides by them;
// the gradient norm is averaged over the steps that measured it (clipping on, step not skipped).
TEST(LogWindow, TokenHitsCountOverPositionsAndTheNormOverMeasuredSteps) {
  dp::launch::LogWindow w;
  w.add({.loss = 2.0, .samples = 4, .top1 = 30, .positions = 64, .grad_norm = 1.5});
  w.add({.loss = 1.0, .samples = 4, .top1 = 34, .positions = 64});  // NaN: a skipped fp16 step
  w.add({.loss = 1.0, .samples = 4, .top1 = 0, .positions = 64, .grad_norm = 0.5});
  EXPECT_EQ(w.samples, 12);
  EXPECT_EQ(w.positions, 192);
  EXPECT_DOUBLE_EQ(static_cast<double>(w.hits) / w.positions, 64.0 / 192);
  EXPECT_EQ(w.norm_steps, 2);
  EXPECT_DOUBLE_EQ(w.grad_norm / w.norm_steps, 1.0);
  dp::launch::LogWindow images;  // no positions given: one per sample
  images.add({.loss = 1.0, .samples = 10, .top1 = 3});
  EXPECT_EQ(images.positions, 10);
  EXPECT_EQ(images.norm_steps, 0);
}

TEST(Hms, RoundsToTheNearestSecond) {
  EXPECT_EQ(dp::launch::hms(0.4), "0s");
  EXPECT_EQ(dp::launch::hms(41.6), "42s");
  EXPECT_EQ(dp::launch::hms(185), "3m05s");
  EXPECT_EQ(dp::launch::hms(3725), "1h02m");
  EXPECT_EQ(dp::launch::hms(-1), "?");
  EXPECT_EQ(dp::launch::hms(std::numeric_limits<double>::infinity()), "?");
}

}  // namespace
