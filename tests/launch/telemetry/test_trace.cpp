// Chrome trace: a rank's fragment and the merged trace.json parse as JSON and hold the events of
// every rank and lane (metadata included), appends from several threads all arrive, and the
// step-window parser's exact errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <thread>

#include "base/error.h"
#include "launch/telemetry/step_range.h"
#include "launch/telemetry/trace.h"

namespace dp::metrics {
namespace {

using nlohmann::json;

// Events with ph == "X" of (pid, tid), names in order.
std::vector<std::string> names_of(const json& events, int pid, int tid) {
  std::vector<std::string> out;
  for (const auto& e : events)
    if (e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid) out.push_back(e["name"]);
  return out;
}

std::string metadata(const json& events, const std::string& kind, int pid, int tid) {
  for (const auto& e : events)
    if (e["ph"] == "M" && e["name"] == kind && e["pid"] == pid && e["tid"] == tid) return e["args"]["name"];
  return "(none)";
}

// What one rank of a 2-bucket step records.
std::string rank_fragment(int rank, double t0) {
  TraceRecorder t(rank);
  t.complete("data wait", "data", kLaneData, t0, 5);
  t.complete("forward", "step", kLaneCompute, t0 + 5, 100);
  t.complete("backward", "step", kLaneCompute, t0 + 105, 200);
  t.complete("allreduce bucket 0", "comm", kLaneComm, t0 + 150, 80);
  t.complete("allreduce bucket 1", "comm", kLaneComm, t0 + 300, 40);
  t.complete("optimizer", "step", kLaneCompute, t0 + 340, 20);
  return t.fragment();
}

TEST(Trace, FragmentHoldsMetadataAndCompleteEvents) {
  const json f = json::parse(rank_fragment(3, 1000));
  ASSERT_TRUE(f.is_array());
  EXPECT_EQ(metadata(f, "process_name", 3, 0), "rank 3");
  EXPECT_EQ(metadata(f, "thread_name", 3, kLaneCompute), "compute");
  EXPECT_EQ(metadata(f, "thread_name", 3, kLaneComm), "comm");
  EXPECT_EQ(metadata(f, "thread_name", 3, kLaneData), "data");
  EXPECT_EQ(names_of(f, 3, kLaneCompute), (std::vector<std::string>{"forward", "backward", "optimizer"}));
  EXPECT_EQ(names_of(f, 3, kLaneComm), (std::vector<std::string>{"allreduce bucket 0", "allreduce bucket 1"}));
  EXPECT_EQ(names_of(f, 3, kLaneData), (std::vector<std::string>{"data wait"}));
  for (const auto& e : f)
    if (e["name"] == "backward") {
      EXPECT_EQ(e["cat"], "step");
      EXPECT_EQ(e["ts"].get<double>(), 1105.0);
      EXPECT_EQ(e["dur"].get<double>(), 200.0);
    }
}

TEST(Trace, MergedTraceHasEveryRankAndBucket) {
  const std::string merged = merge_trace_fragments({rank_fragment(0, 0), rank_fragment(1, 2), rank_fragment(2, 4)});
  const json t = json::parse(merged);
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  const json& ev = t["traceEvents"];
  // Per rank: 6 complete events; 2 process + 3 x 2 thread metadata events.
  EXPECT_EQ(ev.size(), 3u * (6 + 2 + 6));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(metadata(ev, "process_name", r, 0), "rank " + std::to_string(r));
    EXPECT_EQ(names_of(ev, r, kLaneComm), (std::vector<std::string>{"allreduce bucket 0", "allreduce bucket 1"}));
    EXPECT_EQ(names_of(ev, r, kLaneCompute).size(), 3u);
  }
}

TEST(Trace, BadFragmentIsNamed) {
  try {
    merge_trace_fragments({"[]", "{\"x\":1}"});
    FAIL();
  } catch (const DpError& e) {
    EXPECT_STREQ(e.what(), "trace fragment 1 (of 2) is not a JSON array of trace events");
  }
}

TEST(Trace, ExtraLanesScopesAndDisabling) {
  TraceRecorder t(0);
  EXPECT_EQ(t.lane("comm"), kLaneComm);
  const int io = t.lane("checkpoint io");
  EXPECT_EQ(io, 3);
  EXPECT_EQ(t.lane("checkpoint io"), 3);
  const double before = TraceRecorder::now_us();
  { auto s = t.scope("save", "ckpt", io); }
  t.set_enabled(false);
  { auto s = t.scope("not recorded", "ckpt", io); }
  t.complete("not recorded either", "x", kLaneCompute, 0, 1);
  t.add({"conv1", "forward", io, 10, 2});  // measured earlier (the layer profile's lane): recorded
  EXPECT_THROW(t.add({"bad", "x", 9, 0, 1}), DpError) << "an unregistered lane";
  t.set_enabled(true);
  const auto ev = t.events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].name, "save");
  EXPECT_EQ(ev[0].lane, 3);
  EXPECT_EQ(ev[1].name, "conv1");
  EXPECT_EQ(ev[1].ts_us, 10);
  EXPECT_EQ(ev[1].dur_us, 2);
  EXPECT_GE(ev[0].ts_us, before);
  EXPECT_GE(ev[0].dur_us, 0.0);
  EXPECT_GT(before, 1.6e15);  // wall-clock microseconds (after 2020)
  const json f = json::parse(t.fragment());
  EXPECT_EQ(metadata(f, "thread_name", 0, 3), "checkpoint io");
}

TEST(Trace, ConcurrentAppendsAllArrive) {
  TraceRecorder t(1);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&t, k] {
      for (int i = 0; i < 1000; ++i) t.complete("e", "comm", k % 2 ? kLaneComm : kLaneCompute, i, 1);
    });
  for (auto& th : threads) th.join();
  const json f = json::parse(t.fragment());
  EXPECT_EQ(names_of(f, 1, kLaneComm).size(), 2000u);
  EXPECT_EQ(names_of(f, 1, kLaneCompute).size(), 2000u);
}

TEST(StepRange, ParsesWindows) {
  auto r = parse_step_range("100-110", "profile.trace_steps");
  EXPECT_EQ(r.first, 100);
  EXPECT_EQ(r.last, 110);
  EXPECT_TRUE(r.contains(100));
  EXPECT_TRUE(r.contains(110));
  EXPECT_FALSE(r.contains(111));
  r = parse_step_range(" 7 ", "k");
  EXPECT_EQ(r.first, 7);
  EXPECT_EQ(r.last, 7);
  EXPECT_TRUE(parse_step_range("", "k").empty());
  EXPECT_FALSE(parse_step_range("", "k").contains(1));
}

TEST(StepRange, BadWindowIsAnExactUserError) {
  for (const std::string bad : {"5-x", "10-5", "0-3", "-3", "3-", "a", "1-2-3"}) {
    try {
      parse_step_range(bad, "profile.trace_steps");
      ADD_FAILURE() << bad;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()), "profile.trace_steps = \"" + bad +
                                           "\": expected \"A-B\" with whole steps 1 <= A <= B (e.g. \"100-110\"), "
                                           "or \"\" for off");
    }
  }
}

}  // namespace
}  // namespace dp::metrics
