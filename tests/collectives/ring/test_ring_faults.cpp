// Faults of the ring backend, each on forked processes: a rank killed with SIGKILL in the middle
// of allreduces (large: the ring, over shared memory and over TCP; small: recursive doubling; 8
// ranks as two nodes of four), a rank that stops calling collectives, abort(), mismatched
// collectives, a peer that shut down its communicator, and Work::wait with a timeout. Ranks
// share memory unless a test says otherwise. Every surviving rank must fail (never hang) with a message naming
// the rank at fault and the collective, within 2x the configured timeout.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <regex>

#include "collectives/collective_tag.h"
#include "collectives/flight_analysis.h"
#include "collectives/ring/ring_communicator.h"
#include "tests/collectives/ring_harness.h"

namespace dp {
namespace {

using ringtest::monotonic_s;
using ringtest::report;
using ringtest::SharedState;

constexpr int kFailedAsExpected = 3;

RingOptions options(double timeout_s, bool shm = true) {
  RingOptions o;
  o.timeout_s = timeout_s;
  if (!shm) o.shm_fifo_bytes = 0;
  return o;
}

// Every rank in `ranks` exited with kFailedAsExpected, its message matches `pattern`, and it
// failed (t_mark) within `within_s` of the shared event time (t_event).
void expect_failed(const std::vector<ringtest::RankResult>& rs, const std::vector<int>& ranks,
                   const std::string& pattern, double within_s) {
  const std::regex re(pattern);
  for (int r : ranks) {
    const auto& res = rs[r];
    EXPECT_EQ(res.exit_code, kFailedAsExpected) << "rank " << r << "\n" << ringtest::summary(rs);
    EXPECT_TRUE(std::regex_search(res.report, re)) << "rank " << r << " said: " << res.report << "\nwanted /"
                                                   << pattern << "/";
    const double late = res.mark - res.event;
    EXPECT_GT(res.event, 0) << "the event time was not recorded";
    EXPECT_LT(late, within_s) << "rank " << r << " failed " << late << " s after the event";
  }
}

// Loops allreduces of `count` f32 until one fails; the victim kills itself with SIGKILL after
// `victim_after_s`, in the middle of one.
void kill_nine(int n, int victim, int64_t count, double timeout_s, bool shm = true, int ranks_per_node = 0) {
  auto rs = ringtest::run_ranks(
      n,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(timeout_s, shm));
        Tensor t = Tensor::zeros({count});
        t.fill_(1.0);
        const double start = monotonic_s();
        try {
          for (int i = 0;; ++i) {
            if (r == victim && monotonic_s() - start > 0.3) {
              WorkPtr w = comm->allreduce_async(t, ReduceOp::Avg);  // in flight when we die
              std::this_thread::sleep_for(std::chrono::microseconds(200));
              s->t_event.store(monotonic_s());
              raise(SIGKILL);
            }
            comm->allreduce(t, ReduceOp::Avg);
          }
        } catch (const DpError& e) {
          s->t_mark[r].store(monotonic_s());
          report(s, r, e.what());
          return kFailedAsExpected;
        }
      },
      /*limit_s=*/4 * timeout_s + 10, ranks_per_node);
  ASSERT_EQ(rs[victim].signal, SIGKILL) << ringtest::summary(rs);
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r)
    if (r != victim) survivors.push_back(r);
  expect_failed(rs, survivors,
                fmt::format(R"(ring allreduce #\d+ \(f32, {} elements, avg\) \[rank \d/{} on [^\]]+\]: rank {} closed )"
                            R"(the connection \(its process died or exited\))",
                            count, n, victim),
                2 * timeout_s);
}

TEST(RingFaults, KillNineInTheMiddleOfRingAllreduceNamesTheDeadRank) { kill_nine(4, 2, 1 << 20, 5.0); }
TEST(RingFaults, KillNineInTheMiddleOfRingAllreduceOverTcpNamesTheDeadRank) {
  kill_nine(4, 1, 1 << 20, 5.0, /*shm=*/false);
}
TEST(RingFaults, KillNineInTheMiddleOfSmallAllreduceNamesTheDeadRank) { kill_nine(3, 0, 16, 5.0); }
TEST(RingFaults, KillNineOnTwoNodesOfFourNamesTheDeadRank) { kill_nine(8, 5, 4096, 5.0, true, 4); }

// Rank 3 stops calling collectives after #3; the others' #4 must time out naming it. Two nodes
// of two: rank 2 waits on rank 3 through shared memory, ranks 0 and 1 through TCP.
TEST(RingFaults, RankThatStopsCallingCollectivesIsNamedInATimeout) {
  constexpr double kTimeout = 1.5;
  constexpr int kStaller = 3;
  auto rs = ringtest::run_ranks(
      4,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(kTimeout));
        Tensor t = Tensor::zeros({1000});
        for (int i = 0; i < 3; ++i) comm->allreduce(t, ReduceOp::Sum);
        if (r == kStaller) {
          std::this_thread::sleep_for(std::chrono::duration<double>(2.5 * kTimeout));
          try {
            comm->allreduce(t, ReduceOp::Sum);  // too late: the others gave up on it
          } catch (const DpError& e) {
            report(s, r, e.what());
            return kFailedAsExpected;
          }
          report(s, r, "the late allreduce succeeded");
          return 1;
        }
        const double start = monotonic_s();
        try {
          comm->allreduce(t, ReduceOp::Sum);
        } catch (const DpError& e) {
          report(s, r, fmt::format("after {:.2f} s: {}", monotonic_s() - start, e.what()));
          return monotonic_s() - start < 2 * kTimeout ? kFailedAsExpected : 4;
        }
        report(s, r, "allreduce #4 succeeded without rank 3");
        return 1;
      },
      /*limit_s=*/30, /*ranks_per_node=*/2);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(rs[r].exit_code, kFailedAsExpected) << ringtest::summary(rs);
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(std::regex_search(rs[r].report,
                                  std::regex(R"(ring allreduce #4 \(f32, 1000 elements, sum\) \[rank \d/4 on [^\]]+\]: )"
                                             R"(rank 3 has not joined this collective \(it last completed #3\); no )"
                                             R"(progress for 1.5 s \(timeout\))")))
        << rs[r].report;
}

// A rank whose process is stopped (SIGSTOP: alive, connections open, answering nothing) in the
// middle of allreduces: the others time out and name it as not answering. Rank 0 then ends it.
TEST(RingFaults, StoppedProcessIsNamedInATimeout) {
  constexpr double kTimeout = 1.0;
  constexpr int kVictim = 1;
  auto rs = ringtest::run_ranks(
      3,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(kTimeout));
        Tensor t = Tensor::zeros({1 << 16});
        const double start = monotonic_s();
        try {
          while (true) {
            if (r == kVictim && monotonic_s() - start > 0.2) {
              comm->allreduce_async(t, ReduceOp::Sum);
              s->t_event.store(monotonic_s());
              raise(SIGSTOP);
            }
            comm->allreduce(t, ReduceOp::Sum);
          }
        } catch (const DpError& e) {
          s->t_mark[r].store(monotonic_s());
          report(s, r, e.what());
          if (r == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let rank 2 fail on its own
            kill(s->pid[kVictim].load(), SIGKILL);
          }
          return kFailedAsExpected;
        }
      },
      /*limit_s=*/20);
  EXPECT_EQ(rs[kVictim].signal, SIGKILL) << ringtest::summary(rs);
  expect_failed(rs, {0, 2},
                R"(ring allreduce #\d+ \(f32, 65536 elements, sum\) \[rank \d/3 on [^\]]+\]: rank 1 does not answer )"
                R"(\(is its process stopped or hung\?\); no progress for 1 s \(timeout\))",
                2 * kTimeout);
}

// abort() on rank 0 while ranks 1 and 2 wait for it in an allreduce.
TEST(RingFaults, AbortFailsThePeersAtOnceWithTheReason) {
  auto rs = ringtest::run_ranks(
      3,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(20));
        Tensor t = Tensor::zeros({100});
        comm->barrier();
        if (r == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          s->t_event.store(monotonic_s());
          comm->abort("test says stop");
          try {
            comm->allreduce(t, ReduceOp::Sum);
          } catch (const DpError& e) {
            s->t_mark[r].store(monotonic_s());
            report(s, r, e.what());
            return kFailedAsExpected;
          }
          return 1;
        }
        try {
          comm->allreduce(t, ReduceOp::Sum);
        } catch (const DpError& e) {
          s->t_mark[r].store(monotonic_s());
          report(s, r, e.what());
          return kFailedAsExpected;
        }
        return 1;
      },
      /*limit_s=*/30);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(rs[r].exit_code, kFailedAsExpected) << ringtest::summary(rs);
    EXPECT_NE(rs[r].report.find("rank 0 aborted the communicator: test says stop"), std::string::npos)
        << rs[r].report;
    EXPECT_NE(rs[r].report.find("ring allreduce #2 (f32, 100 elements, sum)"), std::string::npos) << rs[r].report;
  }
  EXPECT_NE(rs[1].report.find("(reported by rank 0)"), std::string::npos) << rs[1].report;
}

// Rank 0 broadcasts while rank 1 all-reduces. Whoever reads the other's stream header first
// reports the mismatch: rank 1 (rank 0's broadcast header in its allreduce), or rank 0 (rank 1's
// allreduce header in its next collective, the barrier: the root of a broadcast may finish
// before anyone notices; then it names #1, not the barrier). Either way both ranks fail with the
// same explanation.
TEST(RingFaults, MismatchedCollectivesAreAClearError) {
  auto rs = ringtest::run_ranks(
      2,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(20));
        Tensor t = Tensor::zeros({10});
        try {
          if (r == 0) {
            comm->broadcast(t, 0);
            comm->barrier();
          } else {
            comm->allreduce(t, ReduceOp::Max);
          }
        } catch (const DpError& e) {
          report(s, r, e.what());
          return kFailedAsExpected;
        }
        return 1;
      },
      /*limit_s=*/30);
  EXPECT_EQ(ringtest::all_exited_with(rs, kFailedAsExpected), "");
  const std::string tail = ": collectives must be issued in the same order, with the same dtype, size, op and root, "
                           "on every rank";
  const std::string seen_by_1 =
      "rank 0 is in broadcast #1 (f32, 10 elements, algorithm binomial-tree, step 0) while rank 1 expects allreduce #1 "
      "(f32, 10 elements, algorithm recursive-doubling, step 1)" + tail;
  const std::string seen_by_0 =
      "rank 0 issued broadcast (f32, 10 elements, root 0) as #1 while rank 1 issued allreduce (f32, 10 elements, "
      "max): the collective differs; collectives must be issued in the same order, with the same dtype, size, op "
      "and root, on every rank";
  EXPECT_TRUE(std::regex_search(rs[1].report,
                                std::regex(R"(^ring allreduce #1 \(f32, 10 elements, max\) \[rank 1/2 on [^\]]+\]: )")))
      << rs[1].report;
  EXPECT_TRUE(std::regex_search(rs[0].report, std::regex(R"(^ring (barrier #2|broadcast #1 \(f32, 10 elements, )"
                                                         R"(root 0\)) \[rank 0/2 on [^\]]+\]: )")))
      << rs[0].report;
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(rs[r].report.find(seen_by_1) != std::string::npos ||
                rs[r].report.find(seen_by_0) != std::string::npos)
        << rs[r].report;
}

// Ranks that disagree on the root of a broadcast: nobody reads a stream header that shows it,
// and without the control plane's check they waited for the timeout (20 s here). Ranks 0 and 1
// say root 0, rank 2 says root 1: rank 2 waits for rank 1, which never sends. Every rank must
// fail within a second or two, naming the ranks and the root (both of 0 and 1 unless one of them
// was too slow to answer the question). `pause_s`: ranks 0 and 1 pause before their next
// collective, so that rank 2 learns it from its stall probe, not from a later stream header.
void different_roots(double pause_s) {
  auto rs = ringtest::run_ranks(
      3,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(20));
        Tensor t = Tensor::zeros({10});
        comm->barrier();
        if (r == 0) s->t_event.store(monotonic_s());
        try {
          comm->broadcast(t, r == 2 ? 1 : 0);
          if (r != 2) std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
          comm->barrier();
        } catch (const DpError& e) {
          s->t_mark[r].store(monotonic_s());
          report(s, r, e.what());
          return kFailedAsExpected;
        }
        return 1;
      },
      /*limit_s=*/30);
  expect_failed(rs, {0, 1, 2},
                R"((ranks 0, 1|rank [01]) issued broadcast \(f32, 10 elements, root 0\) as #2 while rank 2 issued broadcast )"
                R"(\(f32, 10 elements, root 1\): the root differs; collectives must be issued in the same order)",
                /*within_s=*/2.0 + pause_s);
  EXPECT_NE(rs[2].report.find("ring broadcast #2 (f32, 10 elements, root 1) [rank 2/3 on "), std::string::npos)
      << rs[2].report;
  EXPECT_LT(rs[2].mark - rs[2].event, 2.0) << rs[2].report;
}

TEST(RingFaults, BroadcastWithDifferentRootsFailsAtOnceNamingTheRanks) { different_roots(0); }
TEST(RingFaults, BroadcastWithDifferentRootsFailsAtOnceAlsoWhenThePeersGoQuiet) { different_roots(1.0); }

// Two ranks that each believe they are the root: both only send, so both finish the broadcast;
// the next collective reads the other's stale stream and names the broadcast, not itself.
TEST(RingFaults, BroadcastWhereEveryRankIsTheRootFailsInTheNextCollective) {
  auto rs = ringtest::run_ranks(
      2,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(20));
        Tensor t = Tensor::zeros({10});
        if (r == 0) s->t_event.store(monotonic_s());
        try {
          comm->broadcast(t, r);
          comm->barrier();
        } catch (const DpError& e) {
          s->t_mark[r].store(monotonic_s());
          report(s, r, e.what());
          return kFailedAsExpected;
        }
        return 1;
      },
      /*limit_s=*/30);
  expect_failed(rs, {0, 1},
                R"(^ring barrier #2 \[rank [01]/2 on [^\]]+\]: rank 0 issued broadcast \(f32, 10 elements, root 0\) )"
                R"(as #1 while rank 1 issued broadcast \(f32, 10 elements, root 1\): the root differs)",
                /*within_s=*/2.0);
}

// Rank 0 leaves (destroys its communicator) after #1; rank 1's #2 can never complete.
TEST(RingFaults, PeerThatShutDownIsNamed) {
  auto rs = ringtest::run_ranks(
      2,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(20));
        Tensor t = Tensor::zeros({10});
        comm->allreduce(t, ReduceOp::Sum);
        if (r == 0) {
          comm.reset();
          return kFailedAsExpected;
        }
        try {
          comm->allreduce(t, ReduceOp::Sum);
        } catch (const DpError& e) {
          report(s, r, e.what());
          return kFailedAsExpected;
        }
        return 1;
      },
      /*limit_s=*/30);
  EXPECT_EQ(ringtest::all_exited_with(rs, kFailedAsExpected), "");
  EXPECT_NE(rs[1].report.find("ring allreduce #2 (f32, 10 elements, sum) [rank 1/2 on "), std::string::npos)
      << rs[1].report;
  EXPECT_NE(rs[1].report.find("rank 0 shut down its communicator after #1"), std::string::npos) << rs[1].report;
}

// Work::wait(timeout): times out while the peer is late, then the same work completes.
TEST(RingFaults, WorkWaitWithATimeoutThenCompletes) {
  auto rs = ringtest::run_ranks(
      2,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(20));
        Tensor t = Tensor::zeros({5});
        t.fill_(r + 1.0);
        if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
        WorkPtr w = comm->allreduce_async(t, ReduceOp::Sum);
        if (r == 0) {
          if (w->is_completed()) {
            report(s, r, "completed before the peer arrived");
            return 1;
          }
          try {
            w->wait(0.1);
            report(s, r, "wait(0.1) returned before the peer arrived");
            return 1;
          } catch (const DpError& e) {
            report(s, r, std::string(e.what()) + "\n");
          }
        }
        w->wait();
        if (!w->is_completed() || w->seq() != 1) return 1;
        for (int i = 0; i < 5; ++i)
          if (t.data<float>()[i] != 3.0f) {
            report(s, r, fmt::format("element {} is {}", i, t.data<float>()[i]));
            return 1;
          }
        return 0;
      },
      /*limit_s=*/30);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
  EXPECT_NE(rs[0].report.find("ring allreduce #1 (f32, 5 elements, sum) [rank 0/2 on "), std::string::npos)
      << rs[0].report;
  EXPECT_NE(rs[0].report.find("not completed after 0.1 s (wait timeout)"), std::string::npos) << rs[0].report;
}

}  // namespace
}  // namespace dp

namespace dp {
namespace {

// The flight recorder on a real timeout: rank 3 (two nodes of two, so the all-reduces are
// hierarchical) stops calling collectives after #3; the others time out in #4, each writes its
// record, and diagnose_flight names rank 3 and the bucket and step of #4.
TEST(RingFaults, FlightRecordsOfATimeoutNameTheRankThatNeverEntered) {
  namespace fs = std::filesystem;
  constexpr double kTimeout = 1.5;
  const fs::path dir = fs::temp_directory_path() / fmt::format("dptrain-flight-fault-{}", getpid());
  auto rs = ringtest::run_ranks(
      4,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(kTimeout));
        comm->flight_recorder()->set_path((dir / "flight" / fmt::format("rank-{}.json", r)).string());
        set_collective_step(7);
        Tensor t = Tensor::zeros({1000});
        for (int b = 0; b < 3; ++b) {
          BucketScope tag(b);
          comm->allreduce(t, ReduceOp::Avg);
        }
        if (r == 3) {  // hangs elsewhere, then is killed: no record of its own
          std::this_thread::sleep_for(std::chrono::duration<double>(3 * kTimeout));
          return kFailedAsExpected;
        }
        try {
          BucketScope tag(2);
          comm->allreduce(t, ReduceOp::Avg);
        } catch (const CommunicationError& e) {
          report(s, r, e.what());
          return kFailedAsExpected;
        }
        return 1;
      },
      /*limit_s=*/30, /*ranks_per_node=*/2);
  EXPECT_EQ(ringtest::all_exited_with(rs, kFailedAsExpected), "");
  const std::vector<RankFlight> recs = read_flight_dir(dir.string());
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].collectives.at(4).op, "allreduce");
  EXPECT_EQ(recs[0].collectives.at(3).state, "done");
  EXPECT_EQ(diagnose_flight(recs), "rank 3 never entered all-reduce #4 (bucket 2, step 7); all others are waiting in it");
  fs::remove_all(dir);
}

// The desync check: ranks that reduce different gradient buckets of the same size (which no
// other field of the stream headers tells apart) fail at once, naming the bucket.
// Rank 0 names the ranks whose headers it has compared when it finds the mismatch: rank 1's may
// or may not have arrived by then ("ranks 0, 1 issued" or "rank 0 issued"; both true).
TEST(RingFaults, DifferentBucketsOfTheSameSizeAreADesync) {
  auto rs = ringtest::run_ranks(
      3,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(20));
        Tensor t = Tensor::zeros({256});
        comm->barrier();
        const double start = monotonic_s();
        try {
          BucketScope tag(r == 2 ? 5 : 4);
          comm->allreduce(t, ReduceOp::Avg);
        } catch (const CommunicationError& e) {
          report(s, r, e.what());
          return monotonic_s() - start < 5 ? kFailedAsExpected : 4;
        }
        return 1;
      },
      /*limit_s=*/30);
  EXPECT_EQ(ringtest::all_exited_with(rs, kFailedAsExpected), "");
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(std::regex_search(
        rs[r].report, std::regex(R"((ranks 0, 1|rank 0) issued allreduce \(f32, 256 elements, avg, bucket 4\) as #2 while rank 2 )"
                                 R"(issued allreduce \(f32, 256 elements, avg, bucket 5\): the gradient bucket differs)")))
        << "rank " << r << ": " << rs[r].report;
}

// A collective that moves no data (an empty bucket: nothing to compare on the wire) and differs
// only in its bucket is found by the running hash in the next one, and named.
TEST(RingFaults, AnEarlierBucketMismatchIsFoundByTheHistory) {
  auto rs = ringtest::run_ranks(
      3,
      [&](Bootstrap& bs, SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, options(20));
        Tensor empty = Tensor::zeros({0}), t = Tensor::zeros({16});
        try {
          {
            BucketScope tag(r == 2 ? 1 : 0);
            comm->allreduce(empty, ReduceOp::Avg);  // #1: no stream, no header to compare
          }
          comm->allreduce(t, ReduceOp::Avg);        // #2: the histories differ
        } catch (const CommunicationError& e) {
          report(s, r, e.what());
          return kFailedAsExpected;
        }
        return 1;
      },
      /*limit_s=*/30);
  EXPECT_EQ(ringtest::all_exited_with(rs, kFailedAsExpected), "");
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(std::regex_search(rs[r].report, std::regex(R"(issued allreduce \(f32, 0 elements, avg, bucket [01]\) as #1 )"
                                                           R"(while rank \d issued allreduce \(f32, 0 elements, avg, )"
                                                           R"(bucket [01]\): the gradient bucket differs.*\(found by the )"
                                                           R"(desync check in #2\))")))
        << "rank " << r << ": " << rs[r].report;
}

}  // namespace
}  // namespace dp
