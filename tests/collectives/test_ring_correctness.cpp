// The ring backend against a serial oracle: every op x dtype x reduction x size {0, 1, 7, 1023,
// 5003 (divisible by none of 2, 3, 4, 8)} on 2, 3, 4 and 8 forked processes, with both the
// latency algorithms (recursive doubling, binomial tree) and the bandwidth ones (ring, chain),
// pieces of 1000 bytes so that even small messages are pipelined, each over shared memory
// (FIFOs of 4 KiB, so that they fill and wrap) and over TCP; the same on 4 ranks as two "nodes"
// of two (shared memory inside, TCP across, both in one collective); and a 64 MiB f32 sum with
// the default options on 2, 3 and 4 processes.
//
// The oracle (computed in each child from the same deterministic inputs) replays the order that
// collectives/ring/algorithms.h documents, one element at a time through the same reduce kernel:
// its results must match bit for bit, for every dtype. Independently, float sums must lie within
// (N+1) * eps(dtype) * sum|x| of the exact (f64, rank-order) sum (divided by N for avg), so that
// an oracle that replays a wrong order cannot hide a wrong result; max/min and integers exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "collectives/ring/algorithms.h"
#include "collectives/ring/ring_communicator.h"
#include "kernels/cpu/reduce.h"
#include "ring_harness.h"

namespace dp {
namespace {

using kernels::cpu::ReduceKind;
using ringtest::as_double;
using ringtest::input_value;

constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};
constexpr int64_t kSizes[] = {0, 1, 7, 1023, 5003};

ReduceKind kind_of(ReduceOp op) {
  return op == ReduceOp::Max ? ReduceKind::Max : op == ReduceOp::Min ? ReduceKind::Min : ReduceKind::Sum;
}

double eps_of(DType dt) {
  switch (dt) {
    case DType::F32: return 0x1.0p-24;
    case DType::F16: return 0x1.0p-11;
    case DType::BF16: return 0x1.0p-8;
    case DType::F64: return 0x1.0p-53;
    default: return 0;
  }
}

// One element of a reduction: x[q] for every rank q, and the two oracles.
struct Element {
  DType dt;
  ReduceOp op;
  int n;
  alignas(8) unsigned char x[ringtest::kMaxRanks][8];

  void load(uint64_t seed, int64_t index) {
    for (int q = 0; q < n; ++q) input_value(dt, seed, q, index, x[q]);
  }
  void finish(unsigned char* acc) const {
    if (op == ReduceOp::Avg) kernels::cpu::divide(dt, acc, 1, n);
  }
  // Ring order for a block owned by rank j: x[j+1], x[j+2], ..., x[j] (mod n).
  void ring(int j, unsigned char* acc) const {
    const size_t esz = dtype_size(dt);
    std::memcpy(acc, x[(j + 1) % n], esz);
    for (int k = 2; k <= n; ++k) kernels::cpu::reduce(dt, kind_of(op), acc, acc, x[(j + k) % n], 1);
    finish(acc);
  }
  // Recursive doubling: fold ranks >= P into r - P, then pairs at distance 1, 2, 4, ...
  void recursive_doubling(unsigned char* acc) const {
    const size_t esz = dtype_size(dt);
    const int p2 = ring::lower_power_of_two(n);
    unsigned char v[ringtest::kMaxRanks][8];
    for (int q = 0; q < p2; ++q) {
      std::memcpy(v[q], x[q], esz);
      if (q + p2 < n) kernels::cpu::reduce(dt, kind_of(op), v[q], v[q], x[q + p2], 1);
    }
    for (int dist = 1; dist < p2; dist *= 2)
      for (int q = 0; q < p2; ++q)
        if (q < (q ^ dist)) {
          kernels::cpu::reduce(dt, kind_of(op), v[q], v[q], v[q ^ dist], 1);
          std::memcpy(v[q ^ dist], v[q], esz);
        }
    std::memcpy(acc, v[0], esz);
    finish(acc);
  }
  // Independent check of a float result against the exact sum / max / min.
  bool plausible(const unsigned char* got, std::string* why) const {
    double g = as_double(dt, got);
    if (dt == DType::I32) return true;  // exact replay is exact arithmetic here
    double sum = 0, abs_sum = 0, mx = -INFINITY, mn = INFINITY;
    for (int q = 0; q < n; ++q) {
      double v = as_double(dt, x[q]);
      sum += v;
      abs_sum += std::fabs(v);
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    double want = 0, tol = 0;
    switch (op) {
      case ReduceOp::Max: want = mx; break;
      case ReduceOp::Min: want = mn; break;
      case ReduceOp::Sum: want = sum; tol = (n + 1) * eps_of(dt) * abs_sum; break;
      case ReduceOp::Avg: want = sum / n; tol = (n + 2) * eps_of(dt) * abs_sum / n; break;
    }
    if (std::fabs(g - want) <= tol) return true;
    *why = fmt::format("{} is not within {} of the exact {}", g, tol, want);
    return false;
  }
};

// Collects mismatches in a child; the first few go to the report.
struct Checker {
  ringtest::SharedState* s;
  int rank;
  int failures = 0;
  void fail(const std::string& what) {
    if (++failures <= 5) ringtest::report(s, rank, what + "\n");
  }
};

std::string bytes_hex(const unsigned char* p, size_t n) {
  std::string h;
  for (size_t i = n; i-- > 0;) h += fmt::format("{:02x}", p[i]);
  return h;
}

void check_element(Checker& ck, const std::string& what, int64_t i, const unsigned char* got,
                   const unsigned char* want, const Element& e) {
  const size_t esz = dtype_size(e.dt);
  if (std::memcmp(got, want, esz) != 0) {
    ck.fail(fmt::format("{}: element {} is {} ({:g}), the oracle says {} ({:g})", what, i, bytes_hex(got, esz),
                        as_double(e.dt, got), bytes_hex(want, esz), as_double(e.dt, want)));
    return;
  }
  std::string why;
  if (!e.plausible(got, &why)) ck.fail(fmt::format("{}: element {}: {}", what, i, why));
}

Tensor input_tensor(DType dt, uint64_t seed, int rank, int64_t count, int64_t first_index = 0) {
  Tensor t = Tensor::zeros({count}, dt);
  auto* p = static_cast<unsigned char*>(t.raw());
  for (int64_t i = 0; i < count; ++i) input_value(dt, seed, rank, first_index + i, p + i * dtype_size(dt));
  return t;
}

uint64_t case_seed(int a, int b, int c, int d) { return ringtest::splitmix64((a * 131 + b) * 131 * 131 + c * 131 + d); }

// Every op x dtype x reduction x size through one communicator. `latency`: the communicator
// uses recursive doubling and the binomial tree (else the ring and the chain).
void run_matrix(Communicator& comm, bool latency, Checker& ck, uint64_t* seq) {
  const int n = comm.size(), r = comm.rank();
  const std::string algo = latency ? "latency" : "bandwidth";
  for (DType dt : kDTypes) {
    const size_t esz = dtype_size(dt);
    for (int64_t count : kSizes) {
      for (ReduceOp op : kOps) {
        // allreduce
        uint64_t seed = case_seed(1, static_cast<int>(dt), static_cast<int>(count), static_cast<int>(op));
        Tensor t = input_tensor(dt, seed, r, count);
        WorkPtr w = comm.allreduce_async(t, op);
        w->wait();
        if (w->seq() != ++*seq) ck.fail(fmt::format("allreduce got sequence number {}, expected {}", w->seq(), *seq));
        std::string what = fmt::format("{} allreduce {} {} of {}", algo, dtype_name(dt), reduce_op_name(op), count);
        Element e{dt, op, n, {}};
        unsigned char want[8];
        for (int64_t i = 0; i < count; ++i) {
          e.load(seed, i);
          if (latency) {
            e.recursive_doubling(want);
          } else {
            int j = 0;
            while (ring::ring_block(count, n, j).begin + ring::ring_block(count, n, j).len <= i) ++j;
            e.ring(j, want);
          }
          check_element(ck, what, i, static_cast<unsigned char*>(t.raw()) + i * esz, want, e);
        }
        // reduce_scatter: blocks of `count`, this rank gets block r (ring order from r+1)
        seed = case_seed(2, static_cast<int>(dt), static_cast<int>(count), static_cast<int>(op));
        Tensor in = input_tensor(dt, seed, r, count * n);
        Tensor in_copy = in.clone();
        Tensor out = Tensor::zeros({count}, dt);
        comm.reduce_scatter(in, out, op);
        ++*seq;
        what = fmt::format("{} reduce_scatter {} {} of {} per rank", algo, dtype_name(dt), reduce_op_name(op), count);
        if (std::memcmp(in.raw(), in_copy.raw(), in.nbytes()) != 0) ck.fail(what + ": the input was modified");
        for (int64_t i = 0; i < count; ++i) {
          e.load(seed, r * count + i);
          e.ring(r, want);
          check_element(ck, what, i, static_cast<unsigned char*>(out.raw()) + i * esz, want, e);
        }
      }
      // allgather
      uint64_t seed = case_seed(3, static_cast<int>(dt), static_cast<int>(count), 0);
      Tensor in = input_tensor(dt, seed, r, count);
      Tensor out = Tensor::zeros({count * n}, dt);
      comm.allgather(in, out);
      ++*seq;
      for (int q = 0; q < n; ++q)
        for (int64_t i = 0; i < count; ++i) {
          unsigned char want[8];
          input_value(dt, seed, q, i, want);
          if (std::memcmp(static_cast<unsigned char*>(out.raw()) + (q * count + i) * esz, want, esz) != 0) {
            ck.fail(fmt::format("{} allgather {} of {}: element {} of rank {} differs", algo, dtype_name(dt), count,
                                i, q));
            break;
          }
        }
      // broadcast from a root that changes with the case
      const int root = static_cast<int>((count + static_cast<int>(dt)) % n);
      seed = case_seed(4, static_cast<int>(dt), static_cast<int>(count), 0);
      Tensor b = input_tensor(dt, seed, r, count);
      comm.broadcast(b, root);
      ++*seq;
      Tensor want = input_tensor(dt, seed, root, count);
      if (std::memcmp(b.raw(), want.raw(), b.nbytes()) != 0)
        ck.fail(fmt::format("{} broadcast {} of {} from rank {}: differs from the root's data", algo, dtype_name(dt),
                            count, root));
    }
  }
}

// The barrier: every rank bumps a shared counter, then waits; after the barrier the counter must
// hold every rank's bump. Rank 0 arrives late, so a barrier that does not wait fails this.
void check_barriers(Communicator& comm, ringtest::SharedState* s, Checker& ck) {
  const int n = comm.size();
  comm.barrier();
  if (comm.rank() == 0) s->counter.store(0);
  comm.barrier();
  for (int round = 1; round <= 3; ++round) {
    if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    s->counter.fetch_add(1);
    comm.barrier();
    uint64_t seen = s->counter.load();
    if (seen < static_cast<uint64_t>(n * round))
      ck.fail(fmt::format("barrier {}: only {} of {} arrivals before leaving", round, seen, n * round));
    comm.barrier();  // nobody starts the next round before everyone has checked this one
  }
}

// shm: run over shared memory (where the bootstrap puts ranks on one node) and over TCP.
void matrix_on(int n, int ranks_per_node, bool tcp_too) {
  auto results = ringtest::run_ranks(
      n,
      [tcp_too](Bootstrap& bs, ringtest::SharedState* s, int r) {
        Checker ck{s, r};
        RingOptions latency;
        latency.timeout_s = 30;
        latency.small_bytes = std::numeric_limits<size_t>::max();
        latency.piece_bytes = 1000;
        latency.shm_fifo_bytes = 4096;
        RingOptions bandwidth = latency;
        bandwidth.small_bytes = 0;
        for (bool shm : {true, false}) {
          if (!shm && !tcp_too) break;
          if (!shm) latency.shm_fifo_bytes = bandwidth.shm_fifo_bytes = 0;
          auto c1 = make_ring_communicator(bs, latency);
          auto c2 = make_ring_communicator(bs, bandwidth);
          uint64_t seq1 = 0, seq2 = 0;
          run_matrix(*c1, true, ck, &seq1);
          run_matrix(*c2, false, ck, &seq2);
          check_barriers(*c1, s, ck);
        }
        return ck.failures == 0 ? 0 : 1;
      },
      /*limit_s=*/60, ranks_per_node);
  EXPECT_EQ(ringtest::all_exited_with(results, 0), "");
}

TEST(RingCollectives, EveryOpDtypeReductionAndSizeOn2Ranks) { matrix_on(2, 0, true); }
TEST(RingCollectives, EveryOpDtypeReductionAndSizeOn3Ranks) { matrix_on(3, 0, true); }
TEST(RingCollectives, EveryOpDtypeReductionAndSizeOn4Ranks) { matrix_on(4, 0, true); }
TEST(RingCollectives, EveryOpDtypeReductionAndSizeOn8Ranks) { matrix_on(8, 0, true); }
TEST(RingCollectives, EveryOpDtypeReductionAndSizeOnTwoNodesOfTwo) { matrix_on(4, 2, false); }

// 64 MiB of f32 summed with the default options (so the ring, 256 KiB pieces), over shared
// memory or TCP.
void large_on(int n, bool shm) {
  constexpr int64_t kCount = (64 << 20) / 4;
  auto results = ringtest::run_ranks(
      n,
      [shm](Bootstrap& bs, ringtest::SharedState* s, int r) {
        Checker ck{s, r};
        RingOptions opt;
        if (!shm) opt.shm_fifo_bytes = 0;
        auto comm = make_ring_communicator(bs, opt);
        const int n = comm->size();
        const uint64_t seed = 77;
        Tensor t = input_tensor(DType::F32, seed, r, kCount);
        comm->barrier();  // time the allreduce, not the slowest rank's input generation
        double t0 = ringtest::monotonic_s();
        comm->allreduce(t, ReduceOp::Sum);
        double dt = ringtest::monotonic_s() - t0;
        if (r == 0)
          ringtest::report(s, r, fmt::format("64 MiB f32 sum on {} ranks over {}: {:.3f} s, busbw {:.2f} GB/s\n", n,
                                             comm->size() > 0 && opt.shm_fifo_bytes ? "shared memory" : "TCP", dt,
                                             2.0 * (n - 1) / n * (64 << 20) / dt / 1e9));
        // The oracle of Element::ring written out for f32 sums (same IEEE additions, same
        // order), fast enough for 16 M elements; the tolerance check on every 1000th.
        Element e{DType::F32, ReduceOp::Sum, n, {}};
        const float* got = t.data<float>();
        for (int j = 0; j < n; ++j) {
          ring::Block b = ring::ring_block(kCount, n, j);
          for (int64_t i = b.begin; i < b.begin + b.len; ++i) {
            float acc, x;
            input_value(DType::F32, seed, (j + 1) % n, i, &acc);
            for (int k = 2; k <= n; ++k) {
              input_value(DType::F32, seed, (j + k) % n, i, &x);
              acc += x;
            }
            if (kernels::cpu::f32_bits(acc) != kernels::cpu::f32_bits(got[i]) || i % 1000 == 0) {
              e.load(seed, i);
              check_element(ck, "64 MiB f32 sum", i, reinterpret_cast<const unsigned char*>(got + i),
                            reinterpret_cast<const unsigned char*>(&acc), e);
              if (ck.failures > 5) return 1;
            }
          }
        }
        return ck.failures == 0 ? 0 : 1;
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(results, 0), "");
  std::printf("%s", results[0].report.c_str());
}

TEST(RingCollectives, Allreduce64MiBF32SumOn2Ranks) { large_on(2, true); }
TEST(RingCollectives, Allreduce64MiBF32SumOn3Ranks) { large_on(3, true); }
TEST(RingCollectives, Allreduce64MiBF32SumOn4Ranks) { large_on(4, true); }
TEST(RingCollectives, Allreduce64MiBF32SumOverTcpOn3Ranks) { large_on(3, false); }

}  // namespace
}  // namespace dp
