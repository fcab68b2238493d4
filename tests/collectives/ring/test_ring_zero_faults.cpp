// ZeRO's in-place pair under the ring's faults (issue 31): a rank killed with SIGKILL in the middle of
// a reduce_scatter_blocks (the gradient buckets' reduce-scatter) or an allgather_blocks (the
// parameters' all-gather), over shared memory and over TCP, on 2 and 3 ranks (3: blocks of unequal
// length). The mechanism of test_ring_faults.cpp's all-reduce kills (forked ranks, the victim issues
// the collective, lets it start, and raises SIGKILL), and the same bound: every survivor fails
// (never hangs) naming the dead rank and the collective within 2x the configured timeout. Then the
// watchdog's verdict: the survivors' flight records (written on the error), read back by
// diagnose_flight (what tools/flightrec and a restart's "the watchdog:" line print), name the dead
// rank, the collective's kind and number, its bucket and step.
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

namespace fs = std::filesystem;
using ringtest::monotonic_s;
using ringtest::report;
using ringtest::SharedState;

constexpr int kFailedAsExpected = 3;
constexpr double kTimeout = 5.0;
constexpr int kBucket = 3;
constexpr int64_t kStep = 7;

enum class Blocks { ReduceScatter, AllGather };

// Every rank loops the op on a buffer of `count` f32 (tagged bucket 3, step 7) until one fails;
// after 0.3 s the victim issues one more, lets it start (1 ms), records the time (t_event) and the
// collective's number (its report) and kills itself. The buffers are 64 MiB: an op takes several
// ms here, so the victim dies inside its collective #S while every peer waits in #S for its data
// (with a few MiB a peer could finish #S in that millisecond and die waiting in #S + 1).
void kill_nine_in_blocks(Blocks which, int n, int victim, int64_t count, bool shm) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dptrain-zero-fault-{}-{}-{}-{}", getpid(),
                                                               static_cast<int>(which), n, shm ? "shm" : "tcp");
  fs::remove_all(dir);
  auto rs = ringtest::run_ranks(
      n,
      [&](Bootstrap& bs, SharedState* s, int r) {
        RingOptions o;
        o.timeout_s = kTimeout;
        if (!shm) o.shm_fifo_bytes = 0;
        auto comm = make_ring_communicator(bs, o);
        comm->flight_recorder()->set_path((dir / "flight" / fmt::format("rank-{}.json", r)).string());
        set_collective_step(kStep);
        BucketScope tag(kBucket);
        Tensor t = Tensor::zeros({count});
        t.fill_(1.0);
        auto issue = [&] {
          return which == Blocks::ReduceScatter ? comm->reduce_scatter_blocks_async(t, ReduceOp::Avg)
                                                : comm->allgather_blocks_async(t);
        };
        const double start = monotonic_s();
        try {
          while (true) {
            if (r == victim && monotonic_s() - start > 0.3) {
              WorkPtr w = issue();  // in flight when we die
              std::this_thread::sleep_for(std::chrono::milliseconds(1));
              report(s, r, std::to_string(w->seq()));
              s->t_event.store(monotonic_s());
              raise(SIGKILL);
            }
            issue()->wait();
          }
        } catch (const DpError& e) {
          s->t_mark[r].store(monotonic_s());
          report(s, r, e.what());
          return kFailedAsExpected;
        }
      },
      /*limit_s=*/4 * kTimeout + 10);
  ASSERT_EQ(rs[victim].signal, SIGKILL) << ringtest::summary(rs);
  const std::string seq = rs[victim].report;  // the number of the collective it died in
  const char* op = which == Blocks::ReduceScatter ? "reduce_scatter" : "allgather";
  const std::string tail = which == Blocks::ReduceScatter ? ", avg" : "";
  const std::regex said(fmt::format(R"(^ring {} #(\d+) \(f32, {} elements{}\) \[rank \d/{} on [^\]]+\]: )"
                                    R"(rank {} closed the connection \(its process died or exited\))",
                                    op, count, tail, n, victim));
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    const auto& res = rs[r];
    EXPECT_EQ(res.exit_code, kFailedAsExpected) << "rank " << r << "\n" << ringtest::summary(rs);
    std::smatch m;
    EXPECT_TRUE(std::regex_search(res.report, m, said)) << "rank " << r << " said: " << res.report;
    if (!m.empty()) {
      EXPECT_EQ(m[1].str(), seq) << "rank " << r << " names another collective than the victim's";
    }
    EXPECT_GT(res.event, 0) << "the kill's time was not recorded";
    EXPECT_LT(res.mark - res.event, 2 * kTimeout) << "rank " << r << " failed " << res.mark - res.event
                                                  << " s after the kill (the bound: 2x the timeout)";
  }
  const std::vector<RankFlight> recs = read_flight_dir(dir.string());
  ASSERT_EQ(recs.size(), static_cast<size_t>(n - 1)) << "one record per survivor";
  const std::string kind = which == Blocks::ReduceScatter ? "reduce-scatter" : "all-gather";
  EXPECT_EQ(diagnose_flight(recs), fmt::format("rank {} died in {} #{} (bucket {}, step {}); all others are waiting in it",
                                               victim, kind, seq, kBucket, kStep));
  fs::remove_all(dir);
}

TEST(RingZeroFaults, KillNineInReduceScatterBlocksOverSharedMemoryNamesTheDeadRank) {
  kill_nine_in_blocks(Blocks::ReduceScatter, 3, 1, (16 << 20) + 1, /*shm=*/true);
}
TEST(RingZeroFaults, KillNineInReduceScatterBlocksOverTcpNamesTheDeadRank) {
  kill_nine_in_blocks(Blocks::ReduceScatter, 2, 0, 16 << 20, /*shm=*/false);
}
TEST(RingZeroFaults, KillNineInAllgatherBlocksOverSharedMemoryNamesTheDeadRank) {
  kill_nine_in_blocks(Blocks::AllGather, 3, 2, (16 << 20) + 2, /*shm=*/true);
}
TEST(RingZeroFaults, KillNineInAllgatherBlocksOverTcpNamesTheDeadRank) {
  kill_nine_in_blocks(Blocks::AllGather, 2, 1, 16 << 20, /*shm=*/false);
}

}  // namespace
}  // namespace dp
