// The flight recorder (collectives/flight_recorder.h): the ring buffer, the file it writes and
// reads back, and diagnose_flight's one line (collectives/flight_analysis.h) for each way a job
// gets stuck: a rank that never entered, silent ranks, a cut-off host, a dead rank, nobody.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "collectives/flight_analysis.h"
#include "collectives/flight_recorder.h"

namespace dp {
namespace {

FlightRecord record(uint64_t seq, int32_t bucket, int64_t step) {
  FlightRecord r;
  r.seq = seq;
  r.op = "allreduce";
  r.reduce = "avg";
  r.algorithm = "hierarchical";
  r.count = 1000;
  r.bytes = 4000;
  r.tag = {step, bucket};
  return r;
}

TEST(FlightRecorder, KeepsTheLastNAndTheirStates) {
  FlightRecorder rec(4);
  for (uint64_t s = 1; s <= 6; ++s) {
    rec.issued(record(s, static_cast<int32_t>(s % 2), 10));
    rec.started(s);
    if (s < 6) rec.ended(s, s != 5);
  }
  const std::vector<FlightRecord> kept = rec.snapshot();
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept.front().seq, 3u);
  EXPECT_EQ(kept.back().seq, 6u);
  EXPECT_EQ(kept[1].state, FlightRecord::State::Done);     // #4
  EXPECT_EQ(kept[2].state, FlightRecord::State::Failed);   // #5
  EXPECT_EQ(kept[3].state, FlightRecord::State::Running);  // #6
  EXPECT_EQ(rec.last_entered(), 6u);
  EXPECT_EQ(rec.last_completed(), 4u);
  EXPECT_FALSE(rec.write({}, "no path: nothing written"));
}

TEST(FlightRecorder, WritesAFileThatReadsBack) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("dptrain-flight-test-{}", getpid());
  FlightRecorder rec(16);
  rec.issued(record(1, 0, 3));
  rec.started(1);
  rec.ended(1, true);
  rec.issued(record(2, 1, 3));
  rec.started(2);
  rec.set_path((dir / "flight" / "rank-1.json").string());
  FlightContext ctx;
  ctx.rank = 1, ctx.size = 2, ctx.hosts = {"h1", "h2"}, ctx.backend = "ring", ctx.in_flight = 2;
  FlightPeer p;
  p.rank = 0, p.awaited = true, p.queried = true;
  ctx.peers = {p};
  ASSERT_TRUE(rec.write(ctx, "a test"));
  std::ifstream in(dir / "flight" / "rank-1.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  EXPECT_EQ(j["format"], "dptrain-flight");
  EXPECT_EQ(j["host"], "h2");
  EXPECT_EQ(j["collectives"][1]["state"], "running");
  EXPECT_EQ(j["collectives"][1]["bucket"], 1);
  EXPECT_EQ(j["collectives"][1]["step"], 3);
  EXPECT_TRUE(j["collectives"][1]["ended_s"].is_null());
  EXPECT_LE(j["collectives"][0]["ended_s"].get<double>(), 0.0);  // before the file was written
  EXPECT_EQ(j["peers"][0]["awaited"], true);
  const std::vector<RankFlight> back = read_flight_dir(dir.string());
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].rank, 1);
  EXPECT_EQ(back[0].last_entered, 2u);
  EXPECT_EQ(back[0].last_completed, 1u);
  EXPECT_EQ(back[0].collectives.at(2).bucket, 1);
  EXPECT_EQ(back[0].reason, "a test");
  fs::remove_all(dir);
}

TEST(FlightRecorder, RefusesFilesThatAreNotRecords) {
  EXPECT_THROW(parse_flight("{", "x.json"), UserError);
  EXPECT_THROW(parse_flight(R"({"format": "other"})", "x.json"), UserError);
  try {
    parse_flight(R"({"format": "dptrain-flight", "version": 2})", "x.json");
    FAIL() << "version 2 accepted";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "x.json: flight record version 2 (this tool reads version 1; use the tools of the dptrain "
                           "that wrote it)");
  }
  EXPECT_THROW(read_flight_dir("/nonexistent-dptrain-dir"), UserError);
}

// ---- diagnose_flight ----

const std::vector<std::string> kHosts = {"h1", "h1", "h2", "h2", "h3", "h3", "h4", "h4"};

// Rank r's record: in collective `entered` (an all-reduce of bucket 7, step 812) since
// `completed`, having asked the ranks in `asked` (answered: true/false, their position).
struct PeerAnswer {
  int rank;
  bool answered;
  uint64_t entered = 0, completed = 0;
  bool closed = false;
};
RankFlight flight(int r, uint64_t entered, uint64_t completed, std::vector<PeerAnswer> asked = {}) {
  RankFlight f;
  f.rank = r, f.size = 8, f.host = kHosts[r], f.hosts = kHosts;
  f.last_entered = entered, f.last_completed = completed;
  f.in_flight = entered > completed ? entered : 0;
  for (uint64_t s : {entered - 1, entered}) f.collectives[s] = {s, "allreduce", "avg", "running", 7, 812};
  for (const auto& a : asked) {
    RankFlight::Peer p;
    p.rank = a.rank, p.queried = !a.closed, p.answered = a.answered, p.entered = a.entered, p.completed = a.completed;
    p.closed = a.closed;
    f.peers.push_back(p);
  }
  return f;
}

// The ranks not in `silent` asked everyone: the silent ones gave no answer, the others did.
std::vector<RankFlight> survivors(const std::vector<int>& silent, uint64_t s) {
  std::vector<RankFlight> out;
  for (int r = 0; r < 8; ++r) {
    if (std::find(silent.begin(), silent.end(), r) != silent.end()) continue;
    std::vector<PeerAnswer> asked;
    for (int p = 0; p < 8; ++p) {
      if (p == r) continue;
      const bool quiet = std::find(silent.begin(), silent.end(), p) != silent.end();
      asked.push_back({p, !quiet, quiet ? 0 : s, quiet ? 0 : s - 1});
    }
    out.push_back(flight(r, s, s - 1, asked));
  }
  return out;
}

TEST(FlightDiagnosis, SilentRanksWithoutRecordsStoppedAnswering) {
  EXPECT_EQ(diagnose_flight(survivors({4, 5}, 5123)),
            "ranks 4-5 on host h3 stopped answering in all-reduce #5123 (bucket 7, step 812); all others are waiting "
            "in it");
}

TEST(FlightDiagnosis, SilentRanksWhoseRecordsSayTheyWereBehindNeverEntered) {
  // The stopped host was continued later and its ranks wrote their records then: an earlier
  // collective, and no question of theirs went unanswered.
  std::vector<RankFlight> recs = survivors({4, 5}, 5123);
  recs.push_back(flight(4, 5122, 5121));
  recs.push_back(flight(5, 5122, 5121));
  EXPECT_EQ(diagnose_flight(recs),
            "ranks 4-5 on host h3 never entered all-reduce #5123 (bucket 7, step 812); all others are waiting in it");
}

TEST(FlightDiagnosis, ARankThatAnswersButIsBehindNeverEntered) {
  std::vector<RankFlight> recs;
  for (int r = 0; r < 8; ++r) {
    if (r == 6) continue;
    std::vector<PeerAnswer> asked;
    for (int p = 0; p < 8; ++p)
      if (p != r) asked.push_back({p, true, p == 6 ? 40u : 41u, 40});
    recs.push_back(flight(r, 41, 40, asked));
  }
  EXPECT_EQ(diagnose_flight(recs),
            "rank 6 on host h4 never entered all-reduce #41 (bucket 7, step 812); all others are waiting in it");
}

TEST(FlightDiagnosis, ASlowRankAnsweringBetweenCollectivesIsPlacedByItsOwnRecord) {
  // The others asked rank 3 while it was still between #5122 and #5123 (slow, not stuck); rank 3's
  // own record, written when the collective failed, has it waiting in #5123 with them.
  std::vector<RankFlight> recs = survivors({4, 5}, 5123);
  for (auto& rec : recs)
    for (auto& p : rec.peers)
      if (p.rank == 3) p.entered = p.completed = 5122;
  EXPECT_EQ(diagnose_flight(recs),
            "ranks 4-5 on host h3 stopped answering in all-reduce #5123 (bucket 7, step 812); all others are waiting "
            "in it");
}

TEST(FlightDiagnosis, ARankAskedAfterItsOwnTimeoutIsPlacedByItsOwnRecord) {
  // Rank 1 timed out in #4 first and wrote its record there (#4 failed); rank 0 asked it later,
  // when its control plane counted #4 as finished (4, 4). Seen as "nothing says where rank 1 is"
  // in RingFaults.FlightRecordsOfATimeoutNameTheRankThatNeverEntered on a loaded machine.
  auto rec = [](int r, std::vector<PeerAnswer> asked) {
    RankFlight f = flight(r, 4, 3, std::move(asked));
    f.size = 4, f.hosts = {"h1", "h1", "h2", "h2"}, f.host = f.hosts[r];
    f.collectives[4].state = "failed";
    return f;
  };
  const std::vector<RankFlight> recs = {rec(0, {{1, true, 4, 4}, {2, true, 4, 3}, {3, true, 3, 3}}),
                                        rec(1, {{0, true, 4, 3}, {2, true, 4, 3}, {3, true, 3, 3}}),
                                        rec(2, {{0, true, 4, 3}, {1, true, 4, 4}, {3, true, 3, 3}})};
  EXPECT_EQ(diagnose_flight(recs),
            "rank 3 on host h2 never entered all-reduce #4 (bucket 7, step 812); all others are waiting in it");
  // Its own record still running (a SIGUSR2 snapshot, not a failure): the later answer stands.
  std::vector<RankFlight> snap = recs;
  snap[1].collectives[4].state = "running";
  EXPECT_EQ(diagnose_flight(snap),
            "rank 3 on host h2 never entered all-reduce #4 (bucket 7, step 812); rank 0 on host h1, rank 2 on host h2 "
            "are waiting in it; nothing says where rank 1 on host h1 is");
}

TEST(FlightDiagnosis, AHostCutOffAsksInVainToo) {
  std::vector<RankFlight> recs = survivors({4, 5}, 77);
  for (int r : {4, 5}) {
    std::vector<PeerAnswer> asked;
    for (int p = 0; p < 8; ++p)
      if (p != r) asked.push_back({p, p == 9 - r, p == 9 - r ? 77u : 0u, 76});
    recs.push_back(flight(r, 77, 76, asked));
  }
  EXPECT_EQ(diagnose_flight(recs),
            "ranks 4-5 on host h3 lost contact with all other ranks in all-reduce #77 (bucket 7, step 812); all others "
            "are waiting in it too");
}

TEST(FlightDiagnosis, ADeadRankAndOthersInSeveralCollectives) {
  std::vector<RankFlight> recs;
  for (int r = 0; r < 8; ++r) {
    if (r == 2) continue;
    const uint64_t s = r < 4 ? 9 : 10;  // ranks 4-7 went on to the next collective
    recs.push_back(flight(r, s, s - 1, {{2, false, 0, 0, /*closed=*/true}}));
  }
  EXPECT_EQ(diagnose_flight(recs),
            "rank 2 on host h2 died in all-reduce #10 (bucket 7, step 812); ranks 4-5 on host h3, ranks 6-7 on host h4 "
            "are waiting in it; ranks 0-1 on host h1, rank 3 on host h2 in all-reduce #9 (bucket 7, step 812)");
}

TEST(FlightDiagnosis, NobodyMissingGivesTheFirstReason) {
  std::vector<RankFlight> recs = {flight(0, 3, 2), flight(1, 3, 2)};
  recs[0].size = recs[1].size = 2;
  recs[0].hosts = recs[1].hosts = {};
  recs[1].reason = "SIGUSR2 received";
  EXPECT_EQ(diagnose_flight(recs), "no rank is missing from all-reduce #3 (bucket 7, step 812); rank 1 recorded: SIGUSR2 "
                                   "received");
}

TEST(FlightDiagnosis, SilentRanksInACollectiveSomeOthersFinishedStoppedAnsweringInIt) {
  // A ring lets ranks 2-3 finish #84 and go on to #85 before ranks 4-5 stopped; 0-1 and 6-7
  // still wait in #84 with them.
  std::vector<RankFlight> recs;
  for (int r : {0, 1, 2, 3, 6, 7}) {
    const uint64_t s = r == 2 || r == 3 ? 85 : 84;
    std::vector<PeerAnswer> asked;
    for (int p = 0; p < 8; ++p)
      if (p != r) asked.push_back({p, p != 4 && p != 5, (p == 2 || p == 3) ? 85u : 84u, (p == 2 || p == 3) ? 84u : 83u});
    recs.push_back(flight(r, s, s - 1, asked));
  }
  recs.push_back(flight(4, 84, 83));  // written after SIGCONT
  recs.push_back(flight(5, 84, 83));
  EXPECT_EQ(diagnose_flight(recs),
            "ranks 4-5 on host h3 stopped answering in all-reduce #84 (bucket 7, step 812); ranks 0-1 on host h1, ranks "
            "6-7 on host h4 are waiting in it; ranks 2-3 on host h2 in all-reduce #85 (bucket 7, step 812)");
}

}  // namespace
}  // namespace dp
