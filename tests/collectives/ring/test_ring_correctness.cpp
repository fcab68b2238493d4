// The ring backend against a serial oracle: every op x dtype x reduction x size {0, 1, 7, 1023,
// 5003 (divisible by none of 2, 3, 4, 8)} on 2, 3, 4 and 8 forked processes, with both the
// latency algorithms (recursive doubling, binomial tree) and the bandwidth ones (ring, chain),
// pieces of 1000 bytes so that even small messages are pipelined, each over shared memory
// (FIFOs of 4 KiB, so that they fill and wrap) and over TCP; the same on 4 ranks as two "nodes"
// of two (shared memory inside, TCP across, both in one collective); and 64 MiB of every op x
// dtype x reduction with the default options on 2, 3, 4 and 8 processes (periodic inputs, see
// there), plus a 64 MiB f32 sum over TCP with inputs that are not.
//
// The oracle (computed in each child from the same deterministic inputs) replays the order that
// collectives/ring/algorithms.h documents, one element at a time through the same reduce kernel:
// its results must match bit for bit, for every dtype. Independently, float sums must lie within
// (N+1) * eps(dtype) * sum|x| of the exact (f64, rank-order) sum (divided by N for avg), so that
// an oracle that replays a wrong order cannot hide a wrong result; max/min and integers exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/ring/algorithms.h"
#include "collectives/ring/ring_communicator.h"
#include "kernels/cpu/reduce.h"
#include "tests/collectives/ring_harness.h"

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
  // Hierarchical (algorithms.h), nodes of `per_node` consecutive ranks: node k's value is
  // x[kL] (op) (x[kL+1] (op) (...)), then the leaders' ring order (block j of M nodes) or their
  // recursive doubling (latency).
  void hierarchical(int per_node, bool latency, int j, unsigned char* acc) const {
    const size_t esz = dtype_size(dt);
    Element nodes{dt, op, n / per_node, {}};
    for (int k = 0; k < nodes.n; ++k) {
      std::memcpy(nodes.x[k], x[(k + 1) * per_node - 1], esz);
      for (int i = per_node - 2; i >= 0; --i)
        kernels::cpu::reduce(dt, kind_of(op), nodes.x[k], x[k * per_node + i], nodes.x[k], 1);
    }
    nodes.op = op == ReduceOp::Avg ? ReduceOp::Sum : op;  // the average divides by all ranks, once
    if (latency) nodes.recursive_doubling(acc);
    else nodes.ring(j, acc);
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
// uses recursive doubling and the binomial tree (else the ring and the chain). per_node > 0:
// its allreduce is hierarchical over nodes of per_node consecutive ranks.
void run_matrix(Communicator& comm, bool latency, Checker& ck, uint64_t* seq, int per_node = 0) {
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
        std::string what = fmt::format("{}{} allreduce {} {} of {}", per_node ? "hierarchical " : "", algo,
                                       dtype_name(dt), reduce_op_name(op), count);
        Element e{dt, op, n, {}};
        unsigned char want[8];
        for (int64_t i = 0; i < count; ++i) {
          e.load(seed, i);
          if (per_node > 0) {
            const int m = n / per_node;
            int j = 0;
            while (ring::ring_block(count, m, j).begin + ring::ring_block(count, m, j).len <= i) ++j;
            e.hierarchical(per_node, latency, j, want);
          } else if (latency) {
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
// hierarchical: all-reduce hierarchically (with ranks_per_node > 0), else flat.
void matrix_on(int n, int ranks_per_node, bool tcp_too, bool hierarchical = false) {
  auto results = ringtest::run_ranks(
      n,
      [tcp_too, hierarchical, ranks_per_node](Bootstrap& bs, ringtest::SharedState* s, int r) {
        Checker ck{s, r};
        RingOptions latency;
        latency.timeout_s = 30;
        latency.small_bytes = std::numeric_limits<size_t>::max();
        latency.piece_bytes = 1000;
        latency.shm_fifo_bytes = 4096;
        latency.hierarchical = hierarchical;
        RingOptions bandwidth = latency;
        bandwidth.small_bytes = 0;
        for (bool shm : {true, false}) {
          if (!shm && !tcp_too) break;
          if (!shm) latency.shm_fifo_bytes = bandwidth.shm_fifo_bytes = 0;
          auto c1 = make_ring_communicator(bs, latency);
          auto c2 = make_ring_communicator(bs, bandwidth);
          uint64_t seq1 = 0, seq2 = 0;
          run_matrix(*c1, true, ck, &seq1, hierarchical ? ranks_per_node : 0);
          run_matrix(*c2, false, ck, &seq2, hierarchical ? ranks_per_node : 0);
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
// The hierarchical allreduce (the default on such topologies): bit for bit its own documented
// order, and within the flat algorithms' tolerance of the exact result (Element::plausible).
// Nodes of 2 and 3 (a chain with a middle member), 2, 3 (leaders fold in recursive doubling)
// and 4 nodes; FIFOs of 4 KiB and pieces of 1000 bytes, so that the chain and the broadcast
// pipeline and wrap.
TEST(RingCollectives, HierarchicalEveryOpDtypeReductionAndSizeOnTwoNodesOfTwo) { matrix_on(4, 2, false, true); }
TEST(RingCollectives, HierarchicalEveryOpDtypeReductionAndSizeOnTwoNodesOfThree) { matrix_on(6, 3, false, true); }
TEST(RingCollectives, HierarchicalEveryOpDtypeReductionAndSizeOnThreeNodesOfTwo) { matrix_on(6, 2, false, true); }
TEST(RingCollectives, HierarchicalEveryOpDtypeReductionAndSizeOnFourNodesOfTwo) { matrix_on(8, 2, false, true); }

// The blocking forms run on the calling thread only when nothing is queued or running: behind
// an async collective still in flight they queue, and collectives issued from a second thread
// meanwhile wait for the inline one. Issue order = sequence order = execution order on every
// rank, so every result is the sum.
TEST(RingCollectives, BlockingCallsQueueBehindAsyncOnesAndAcrossThreads) {
  auto results = ringtest::run_ranks(
      3,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        auto comm = make_ring_communicator(bs, RingOptions{});
        const int n = comm->size();
        Checker ck{s, r};
        auto expect_sum = [&](const Tensor& t, float one, const char* what) {
          const float want = one * n * (n + 1) / 2;  // rank q contributes one * (q + 1)
          for (int64_t i = 0; i < t.numel(); ++i)
            if (t.data<float>()[i] != want) {
              ck.fail(fmt::format("{}: element {} is {}, expected {}", what, i, t.data<float>()[i], want));
              return;
            }
        };
        for (int round = 0; round < 20; ++round) {
          Tensor big = Tensor::zeros({1 << 18}), small = Tensor::zeros({7}), other = Tensor::zeros({5});
          big.fill_(1.0 * (r + 1));
          small.fill_(2.0 * (r + 1));
          other.fill_(3.0 * (r + 1));
          WorkPtr a = comm->allreduce_async(big, ReduceOp::Sum);  // 1 MiB: still in flight
          WorkPtr c;
          std::thread t2([&] { c = comm->allreduce_async(other, ReduceOp::Sum); });
          t2.join();  // issued before the blocking call below, from another thread
          comm->allreduce(small, ReduceOp::Sum);
          a->wait();
          c->wait();
          if (a->seq() != 3u * round + 1 || c->seq() != 3u * round + 2)
            ck.fail(fmt::format("round {}: sequence numbers {} and {}", round, a->seq(), c->seq()));
          expect_sum(big, 1, "async 1 MiB");
          expect_sum(other, 3, "async from a second thread");
          expect_sum(small, 2, "blocking behind them");
          if (ck.failures) break;
        }
        return ck.failures == 0 ? 0 : 1;
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(results, 0), "");
}

// 64 MiB of f32 summed with the default options (so the ring, 256 KiB pieces), over shared
// memory or TCP, with inputs that are not periodic (every element its own input_value): the
// check that the periodic inputs of the 64 MiB matrix below cannot weaken.
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

TEST(RingCollectives, Allreduce64MiBF32SumOverTcpOn3Ranks) { large_on(3, false); }

// ---- 64 MiB: every op x dtype x reduction on 2, 3, 4 and 8 processes ----
//
// 64 MiB is the whole message: the allreduce and broadcast buffer, the reduce_scatter input, the
// allgather output (rounded down to a multiple of the rank count). Default options: the ring and
// the pipelined chain in 256 KiB pieces, over shared memory. One launch per world size runs all
// of it, so it has to be cheap beside the collectives themselves:
//  - reductions: periodic inputs. Element g of rank q's input is input_value(seed, q, g mod
//    kPeriod), kPeriod = 8191 (prime: no piece, block or FIFO size is a multiple of it). The
//    oracle (Element::ring, the order of algorithms.h) is computed once per (block owner j,
//    g mod kPeriod) and the results are compared with memcmp, one period-long run at a time:
//    bit for bit, every dtype. The float tolerance check runs on every oracle entry. i32 adds
//    g / kPeriod to every rank's element (its exact result then follows in closed form, checked
//    against the oracle on the first period), so that a piece moved by a multiple of the period
//    cannot go unnoticed; the non-periodic 64 MiB f32 test above covers the floats' positions.
//  - allgather and broadcast: bytes of a hash of the word index and the sender, every byte
//    compared.
constexpr int64_t kPeriod = 8191;
constexpr size_t kLargeBytes = size_t{64} << 20;

uint32_t pattern_word(uint64_t k, uint32_t key) {
  uint32_t w = static_cast<uint32_t>(k) * 0x9E3779B1u + key * 0x85EBCA77u;
  return w ^ (w >> 15);
}
uint32_t pattern_key(int rank, DType dt) { return static_cast<uint32_t>(rank * 31 + static_cast<int>(dt) + 1); }

void fill_pattern(char* p, size_t bytes, uint32_t key) {
  const size_t words = bytes / 4;
  for (size_t k = 0; k < words; ++k) {
    const uint32_t w = pattern_word(k, key);
    std::memcpy(p + 4 * k, &w, 4);
  }
  const uint32_t tail = pattern_word(words, key);
  std::memcpy(p + 4 * words, &tail, bytes % 4);
}

// The first byte that differs from fill_pattern(key), or -1.
int64_t pattern_mismatch(const char* p, size_t bytes, uint32_t key) {
  const size_t words = bytes / 4;
  for (size_t k = 0; k < words; ++k) {
    const uint32_t w = pattern_word(k, key);
    if (std::memcmp(p + 4 * k, &w, 4) != 0) return static_cast<int64_t>(4 * k);
  }
  const uint32_t tail = pattern_word(words, key);
  if (std::memcmp(p + 4 * words, &tail, bytes % 4) != 0) return static_cast<int64_t>(4 * words);
  return -1;
}

// The reference of one (dtype, op) on periodic inputs: rows[j] holds, for every residue k,
// the oracle of block owner j (Element::ring); for i32 also the exact sum, max and min of the
// ranks' base values, from which the result with the position term follows.
struct PeriodicOracle {
  DType dt;
  ReduceOp op;
  int n;
  uint64_t seed;
  std::vector<std::vector<unsigned char>> rows;  // (n) x (kPeriod * esz)
  std::vector<int64_t> sum, max, min;            // i32 only: (kPeriod)

  PeriodicOracle(DType dt_, ReduceOp op_, int n_, uint64_t seed_, Checker& ck, const std::string& what)
      : dt(dt_), op(op_), n(n_), seed(seed_) {
    const size_t esz = dtype_size(dt);
    rows.assign(static_cast<size_t>(n), std::vector<unsigned char>(kPeriod * esz));
    if (dt == DType::I32) sum.resize(kPeriod), max.resize(kPeriod), min.resize(kPeriod);
    Element e{dt, op, n, {}};
    for (int64_t k = 0; k < kPeriod; ++k) {
      e.load(seed, k);
      for (int j = 0; j < n; ++j) {
        unsigned char* acc = rows[static_cast<size_t>(j)].data() + k * esz;
        e.ring(j, acc);
        std::string why;
        if (!e.plausible(acc, &why)) ck.fail(fmt::format("{}: the oracle of residue {}: {}", what, k, why));
      }
      if (dt != DType::I32) continue;
      int64_t s = 0, mx = INT64_MIN, mn = INT64_MAX;
      for (int q = 0; q < n; ++q) {
        int32_t v;
        std::memcpy(&v, e.x[q], 4);
        s += v, mx = std::max<int64_t>(mx, v), mn = std::min<int64_t>(mn, v);
      }
      sum[k] = s, max[k] = mx, min[k] = mn;
      for (int j = 0; j < n; ++j)
        if (exact_i32(k) != as_double(dt, rows[static_cast<size_t>(j)].data() + k * esz))
          ck.fail(fmt::format("{}: residue {}: closed form {} but the oracle says {}", what, k, exact_i32(k),
                              as_double(dt, rows[static_cast<size_t>(j)].data() + k * esz)));
    }
  }

  // i32: the exact result at global index g (every rank's element carries + g / kPeriod).
  int32_t exact_i32(int64_t g) const {
    const int64_t k = g % kPeriod, c = g / kPeriod;
    switch (op) {
      case ReduceOp::Sum: return static_cast<int32_t>(sum[k] + n * c);
      case ReduceOp::Avg: return static_cast<int32_t>((sum[k] + n * c) / n);  // C++: toward zero
      case ReduceOp::Max: return static_cast<int32_t>(max[k] + c);
      case ReduceOp::Min: return static_cast<int32_t>(min[k] + c);
    }
    return 0;
  }

  // Rank r's input, elements [first, first + count) of the global index.
  void fill(int r, char* out, int64_t first, int64_t count) const {
    const size_t esz = dtype_size(dt);
    std::vector<unsigned char> base(kPeriod * esz);
    for (int64_t k = 0; k < kPeriod; ++k) input_value(dt, seed, r, k, base.data() + k * esz);
    for (int64_t g = first; g < first + count;) {
      const int64_t k = g % kPeriod, run = std::min(kPeriod - k, first + count - g);
      char* dst = out + (g - first) * esz;
      if (dt == DType::I32) {
        const int32_t c = static_cast<int32_t>(g / kPeriod);
        const auto* b = reinterpret_cast<const int32_t*>(base.data()) + k;
        for (int64_t i = 0; i < run; ++i) {
          const int32_t v = b[i] + c;
          std::memcpy(dst + 4 * i, &v, 4);
        }
      } else {
        std::memcpy(dst, base.data() + k * esz, run * esz);
      }
      g += run;
    }
  }

  // Compares got (global elements [first, first + count), all owned by block owner j). Reports
  // the first mismatching element; returns false on one.
  bool check(Checker& ck, const std::string& what, const char* got, int64_t first, int64_t count, int j) const {
    const size_t esz = dtype_size(dt);
    const unsigned char* row = rows[static_cast<size_t>(j)].data();
    for (int64_t g = first; g < first + count;) {
      const int64_t k = g % kPeriod, run = std::min(kPeriod - k, first + count - g);
      const char* p = got + (g - first) * esz;
      if (dt == DType::I32) {
        const int32_t* got32 = reinterpret_cast<const int32_t*>(p);  // views of our buffers: aligned
        for (int64_t i = 0; i < run; ++i) {
          const int32_t v = got32[i];
          if (v != exact_i32(g + i)) {
            ck.fail(fmt::format("{}: element {} is {}, expected {}", what, g + i - first, v, exact_i32(g + i)));
            return false;
          }
        }
      } else if (std::memcmp(p, row + k * esz, run * esz) != 0) {
        int64_t i = 0;
        while (std::memcmp(p + i * esz, row + (k + i) * esz, esz) == 0) ++i;
        Element e{dt, op, n, {}};
        e.load(seed, k + i);
        check_element(ck, what, g + i - first, reinterpret_cast<const unsigned char*>(p + i * esz),
                      row + (k + i) * esz, e);
        return false;
      }
      g += run;
    }
    return true;
  }
};

void large_matrix_on(int n) {
  auto results = ringtest::run_ranks(
      n,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        Checker ck{s, r};
        auto comm = make_ring_communicator(bs, RingOptions{});
        const int n = comm->size();
        double t_coll = 0, t_oracle = 0, t_fill = 0;  // seconds in each (rank 0's view)
        auto timed = [&](double& into, const std::function<void()>& f) {
          const double t0 = ringtest::monotonic_s();
          f();
          into += ringtest::monotonic_s() - t0;
        };
        const double t_start = ringtest::monotonic_s();
        // Two 64 MiB buffers, viewed as every case needs: fresh ones per case would spend more
        // time faulting pages in than the collectives take.
        const auto buf_a = Storage::allocate(kLargeBytes, Device::cpu());
        const auto buf_b = Storage::allocate(kLargeBytes, Device::cpu());
        auto view = [](const std::shared_ptr<Storage>& b, int64_t count, DType dt) {
          return Tensor::view_of(b, 0, {count}, dt);
        };
        for (DType dt : kDTypes) {
          const size_t esz = dtype_size(dt);
          const int64_t count = static_cast<int64_t>(kLargeBytes / esz);
          for (ReduceOp op : kOps) {
            const std::string tag = fmt::format("64 MiB {} {} on {} ranks", dtype_name(dt), reduce_op_name(op), n);
            const double t0 = ringtest::monotonic_s();
            const PeriodicOracle oracle(dt, op, n, case_seed(5, static_cast<int>(dt), static_cast<int>(op), n), ck,
                                        tag);
            t_oracle += ringtest::monotonic_s() - t0;
            {  // allreduce: block j of the buffer is owned by rank j
              Tensor t = view(buf_a, count, dt);
              timed(t_fill, [&] { oracle.fill(r, static_cast<char*>(t.raw()), 0, count); });
              timed(t_coll, [&] { comm->allreduce(t, op); });
              for (int j = 0; j < n; ++j) {
                const ring::Block b = ring::ring_block(count, n, j);
                oracle.check(ck, "allreduce " + tag, static_cast<const char*>(t.raw()) + b.begin * esz, b.begin,
                             b.len, j);
              }
            }
            {  // reduce_scatter: this rank gets block r of the global input
              const int64_t block = count / n;
              Tensor in = view(buf_a, block * n, dt);
              Tensor out = view(buf_b, block, dt);
              std::memset(out.raw(), 0xee, out.nbytes());  // not the last case's result
              timed(t_fill, [&] { oracle.fill(r, static_cast<char*>(in.raw()), 0, block * n); });
              timed(t_coll, [&] { comm->reduce_scatter(in, out, op); });
              oracle.check(ck, "reduce_scatter " + tag, static_cast<const char*>(out.raw()), r * block, block, r);
            }
            if (ck.failures > 5) return 1;
          }
          {  // allgather
            const int64_t block = count / n;
            Tensor in = view(buf_b, block, dt);
            Tensor out = view(buf_a, block * n, dt);
            std::memset(out.raw(), 0xee, out.nbytes());
            fill_pattern(static_cast<char*>(in.raw()), in.nbytes(), pattern_key(r, dt));
            timed(t_coll, [&] { comm->allgather(in, out); });
            for (int q = 0; q < n; ++q) {
              const int64_t bad = pattern_mismatch(static_cast<const char*>(out.raw()) + q * in.nbytes(), in.nbytes(),
                                                   pattern_key(q, dt));
              if (bad >= 0)
                ck.fail(fmt::format("64 MiB allgather {} on {} ranks: rank {}'s block differs at byte {}",
                                    dtype_name(dt), n, q, bad));
            }
          }
          {  // broadcast from a root that changes with the dtype; the others start with their own bytes
            const int root = (static_cast<int>(dt) + 1) % n;
            Tensor t = view(buf_a, count, dt);
            fill_pattern(static_cast<char*>(t.raw()), t.nbytes(), pattern_key(r, dt));
            timed(t_coll, [&] { comm->broadcast(t, root); });
            const int64_t bad = pattern_mismatch(static_cast<const char*>(t.raw()), t.nbytes(), pattern_key(root, dt));
            if (bad >= 0)
              ck.fail(fmt::format("64 MiB broadcast {} from rank {} on {} ranks: differs from the root's bytes at "
                                  "byte {}",
                                  dtype_name(dt), root, n, bad));
          }
        }
        if (r == 0)
          ringtest::report(s, r, fmt::format("64 MiB matrix on {} ranks: {:.1f} s; {:.1f} s of it in the {} "
                                             "collectives, {:.1f} s making oracles, {:.1f} s filling inputs\n",
                                             n, ringtest::monotonic_s() - t_start, t_coll,
                                             std::size(kDTypes) * (2 * std::size(kOps) + 2), t_oracle, t_fill));
        return ck.failures == 0 ? 0 : 1;
      },
      /*limit_s=*/240);
  EXPECT_EQ(ringtest::all_exited_with(results, 0), "");
  std::printf("%s", results[0].report.c_str());
}

TEST(RingCollectives, Every64MiBOpDtypeAndReductionOn2Ranks) { large_matrix_on(2); }
TEST(RingCollectives, Every64MiBOpDtypeAndReductionOn3Ranks) { large_matrix_on(3); }
TEST(RingCollectives, Every64MiBOpDtypeAndReductionOn4Ranks) { large_matrix_on(4); }
TEST(RingCollectives, Every64MiBOpDtypeAndReductionOn8Ranks) { large_matrix_on(8); }

}  // namespace
}  // namespace dp
