// The progress line's text, and when it is printed: a terminal gets one line redrawn in place,
// a file or pipe gets a plain line every progress_every_s seconds.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "launch/telemetry/progress.h"

namespace dp::metrics {
namespace {

ProgressState full() {
  return {.epoch = 2, .epochs = 10, .step = 1200, .total_steps = 4690, .loss = 0.41234, .accuracy = 0.85214,
          .samples_per_s = 1234.4, .eta_s = 192.9};
}

TEST(Progress, FormatsEveryField) {
  EXPECT_EQ(format_progress(full()), "epoch 2/10  step 1200/4690  loss 0.4123  acc 85.21%  1234 samples/s  ETA 3m12s");
  auto s = full();
  s.samples_per_s = 42.26;
  EXPECT_EQ(format_progress(s), "epoch 2/10  step 1200/4690  loss 0.4123  acc 85.21%  42.3 samples/s  ETA 3m12s");
}

// A language model's progress: token accuracy and tokens/s instead of samples/s.
TEST(Progress, TokenWindowsShowTokenAccuracyAndTokensPerSecond) {
  auto s = full();
  s.tokens_per_s = 1234.4 * 64;
  EXPECT_EQ(format_progress(s), "epoch 2/10  step 1200/4690  loss 0.4123  token acc 85.21%  79002 tokens/s  ETA 3m12s");
  s.tokens_per_s = 12.34;
  EXPECT_EQ(format_progress(s), "epoch 2/10  step 1200/4690  loss 0.4123  token acc 85.21%  12.3 tokens/s  ETA 3m12s");
}

// The data-loading stall: the share of the step time spent waiting for the next batch.
TEST(Progress, ShowsTheDataStall) {
  auto s = full();
  s.data_share = 0.034;
  EXPECT_EQ(format_progress(s),
            "epoch 2/10  step 1200/4690  loss 0.4123  acc 85.21%  1234 samples/s  data 3%  ETA 3m12s");
  s.data_share = 0.0;
  EXPECT_EQ(format_progress(s),
            "epoch 2/10  step 1200/4690  loss 0.4123  acc 85.21%  1234 samples/s  data 0%  ETA 3m12s");
}

TEST(Progress, LeavesOutUnknownFields) {
  EXPECT_EQ(format_progress({.epoch = 1, .epochs = 0, .step = 5}), "epoch 1  step 5");
  auto s = full();
  s.accuracy = std::numeric_limits<double>::quiet_NaN();
  s.eta_s = -1;
  s.total_steps = 0;
  EXPECT_EQ(format_progress(s), "epoch 2/10  step 1200  loss 0.4123  1234 samples/s");
}

TEST(Progress, Durations) {
  EXPECT_EQ(format_duration(0.4), "0s");
  EXPECT_EQ(format_duration(59.9), "59s");
  EXPECT_EQ(format_duration(60), "1m00s");
  EXPECT_EQ(format_duration(3599), "59m59s");
  EXPECT_EQ(format_duration(3600), "1h00m");
  EXPECT_EQ(format_duration(7500), "2h05m");
  EXPECT_EQ(format_duration(100 * 3600 + 59), "100h00m");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "?");
}

TEST(Progress, Eta) {
  EXPECT_EQ(eta_seconds(100, 400, 0.5), 150.0);
  EXPECT_EQ(eta_seconds(400, 400, 0.5), 0.0);
  EXPECT_EQ(eta_seconds(500, 400, 0.5), 0.0);
  EXPECT_EQ(eta_seconds(100, 0, 0.5), -1.0);
  EXPECT_EQ(eta_seconds(100, 400, 0.0), -1.0);
}

TEST(Progress, PlainLinesEveryIntervalFirstAtOnce) {
  ProgressPrinter p(/*terminal=*/false, /*every_s=*/10);
  const std::string line = format_progress(full()) + "\n";
  EXPECT_EQ(p.update(full(), 100.0), line);  // the first update prints
  EXPECT_EQ(p.update(full(), 105.0), "");
  EXPECT_EQ(p.update(full(), 109.99), "");
  EXPECT_EQ(p.update(full(), 110.0), line);
  EXPECT_EQ(p.update(full(), 111.0), "");
  EXPECT_EQ(p.update(full(), 111.0, /*force=*/true), line);
  EXPECT_EQ(p.update(full(), 120.0), "");  // the interval restarts at a forced line
  EXPECT_EQ(p.update(full(), 121.0), line);
  EXPECT_EQ(p.finish(), "");  // plain lines end with their own newline
}

TEST(Progress, PlainLinesAtEveryUpdateWhenIntervalIsZero) {
  ProgressPrinter p(false, 0);
  EXPECT_FALSE(p.update(full(), 1.0).empty());
  EXPECT_FALSE(p.update(full(), 1.0).empty());
}

TEST(Progress, TerminalRedrawsOneLineInPlace) {
  ProgressPrinter p(/*terminal=*/true, /*every_s=*/10);  // every_s is for files: a terminal redraws often
  const std::string redraw = fmt::format("\r{}\x1b[K", format_progress(full()));
  EXPECT_EQ(p.finish(), "");  // nothing showing yet
  EXPECT_EQ(p.update(full(), 100.0), redraw);
  EXPECT_EQ(p.update(full(), 100.1), "");  // at most every kTerminalRefreshS
  EXPECT_EQ(p.update(full(), 100.0 + ProgressPrinter::kTerminalRefreshS), redraw);
  EXPECT_EQ(p.finish(), "\n");
  EXPECT_EQ(p.finish(), "");
}

}  // namespace
}  // namespace dp::metrics
