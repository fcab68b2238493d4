// The pieces of the ring backend that need no peers: half-precision conversions, the reduction
// kernels, the block partition, Work, the single-process communicator, a ring communicator
// of one rank, the wording of the mismatched-collectives error, and the options from the
// DPTRAIN_RING_* tunables.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "collectives/communicator.h"
#include "collectives/ring/algorithms.h"
#include "collectives/ring/ring_communicator.h"
#include "collectives/ring/transport.h"
#include "base/half.h"
#include "kernels/cpu/reduce.h"
#include "tests/collectives/ring_harness.h"
#include "runtime/tunables.h"

namespace dp {
namespace {

using namespace kernels::cpu;

// ---- f16 / bf16 ----

TEST(RingHalf, F16MatchesTheCompilersFloat16OnEveryValueAndRandomFloats) {
#if !defined(__FLT16_MAX__)
  // clang before 15 has no _Float16 on x86 (the sanitizer build, tools/ci/sanitize.sh, uses
  // clang 14); GCC's build runs this test.
  GTEST_SKIP() << "this compiler has no _Float16";
#else
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&ref, &bits, 2);
    float want = static_cast<float>(ref);
    float got = f16_to_f32(bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_TRUE(std::isnan(f16_to_f32(f32_to_f16(got)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(f32_bits(got), f32_bits(want)) << std::hex << h;
    ASSERT_EQ(f32_to_f16(got), bits) << std::hex << h;  // every f16 survives the round trip
  }
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2'000'000; ++i) {
    float f = f32_from_bits(any(rng));
    if (std::isnan(f)) continue;
    _Float16 ref = static_cast<_Float16>(f);  // IEEE round to nearest even
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    ASSERT_EQ(f32_to_f16(f), want) << f;
  }
  // ties go to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10
  EXPECT_EQ(f32_to_f16(1.0f + 0x1.0p-11f), 0x3C00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1.0p-11f), 0x3C02);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(f32_to_f16(0x1.0p-25f), 0x0000);  // halfway to the smallest subnormal: even (0)
#endif
}

// bf16 rounding against a reference by hand: the nearer of the two neighbours, ties to even.
uint16_t bf16_reference(float f) {
  uint32_t u = f32_bits(f);
  uint16_t lo = static_cast<uint16_t>(u >> 16);
  uint32_t rest = u & 0xFFFF;
  if (rest > 0x8000 || (rest == 0x8000 && (lo & 1))) ++lo;
  return lo;
}

TEST(RingHalf, Bf16RoundsToNearestEvenAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(f32_bits(f), h << 16);
    if (!std::isnan(f)) ASSERT_EQ(f32_to_bf16(f), h) << std::hex << h;
    else ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
  }
  std::mt19937 rng(2);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2'000'000; ++i) {
    float f = f32_from_bits(any(rng));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), bf16_reference(f)) << f;
  }
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F808000)), 0x3F80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F818000)), 0x3F82);  // tie, even above
}

// ---- reduction kernels ----

TEST(RingReduce, SumMaxMinInEveryDtype) {
  float a[3] = {1.5f, -2.0f, 7.0f}, b[3] = {0.25f, 3.0f, -7.0f}, d[3];
  reduce(DType::F32, ReduceKind::Sum, d, a, b, 3);
  EXPECT_EQ(d[0], 1.75f);
  EXPECT_EQ(d[1], 1.0f);
  EXPECT_EQ(d[2], 0.0f);
  reduce(DType::F32, ReduceKind::Max, d, a, b, 3);
  EXPECT_EQ(d[1], 3.0f);
  reduce(DType::F32, ReduceKind::Min, d, a, b, 3);
  EXPECT_EQ(d[1], -2.0f);

  double x[2] = {0.1, 1e308}, y[2] = {0.2, 1e308};
  reduce(DType::F64, ReduceKind::Sum, x, x, y, 2);  // in place, dst aliases a
  EXPECT_EQ(x[0], 0.1 + 0.2);
  EXPECT_TRUE(std::isinf(x[1]));

  int32_t i[3] = {std::numeric_limits<int32_t>::max(), -5, 4}, j[3] = {1, 3, -9};
  reduce(DType::I32, ReduceKind::Sum, i, i, j, 3);
  EXPECT_EQ(i[0], std::numeric_limits<int32_t>::min());  // wraps
  EXPECT_EQ(i[1], -2);
  EXPECT_EQ(i[2], -5);

  // f16: combined in f32, rounded once: 2048 + 1 is a tie in f16 (spacing 2) -> 2048 (even)
  uint16_t h1[2] = {f32_to_f16(2048.0f), f32_to_f16(1.0f)}, h2[2] = {f32_to_f16(1.0f), f32_to_f16(0x1.0p-11f)};
  reduce(DType::F16, ReduceKind::Sum, h1, h1, h2, 2);
  EXPECT_EQ(f16_to_f32(h1[0]), 2048.0f);
  EXPECT_EQ(f16_to_f32(h1[1]), 1.0f);  // 1 + 2^-11: tie -> 1
  uint16_t g1[1] = {f32_to_bf16(256.0f)}, g2[1] = {f32_to_bf16(1.5f)};
  reduce(DType::BF16, ReduceKind::Sum, g1, g1, g2, 1);
  EXPECT_EQ(bf16_to_f32(g1[0]), 258.0f);  // 257.5 -> nearest bf16 (spacing 2) is 258
  reduce(DType::BF16, ReduceKind::Max, g1, g1, g2, 1);
  EXPECT_EQ(bf16_to_f32(g1[0]), 258.0f);
}

TEST(RingReduce, MaxAndMinPropagateNanFromEitherSide) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float a[2] = {nan, 1.0f}, b[2] = {1.0f, nan}, d[2];
  reduce(DType::F32, ReduceKind::Max, d, a, b, 2);
  EXPECT_TRUE(std::isnan(d[0]));
  EXPECT_TRUE(std::isnan(d[1]));
  reduce(DType::F32, ReduceKind::Min, d, a, b, 2);
  EXPECT_TRUE(std::isnan(d[0]));
  EXPECT_TRUE(std::isnan(d[1]));
  uint16_t h[2] = {f32_to_f16(nan), f32_to_f16(1.0f)}, k[2] = {f32_to_f16(1.0f), f32_to_f16(nan)};
  reduce(DType::F16, ReduceKind::Max, h, h, k, 2);
  EXPECT_TRUE(std::isnan(f16_to_f32(h[0])));
  EXPECT_TRUE(std::isnan(f16_to_f32(h[1])));
}

TEST(RingReduce, DivideIsTheAverageStepOfEveryDtype) {
  int32_t i[4] = {7, -7, 8, -1};
  divide(DType::I32, i, 4, 2);
  EXPECT_EQ(i[0], 3);
  EXPECT_EQ(i[1], -3);  // toward zero
  EXPECT_EQ(i[2], 4);
  EXPECT_EQ(i[3], 0);
  float f[1] = {1.0f};
  divide(DType::F32, f, 1, 3);
  EXPECT_EQ(f[0], 1.0f / 3.0f);
  uint16_t h[1] = {f32_to_f16(1.0f)};
  divide(DType::F16, h, 1, 3);
  EXPECT_EQ(h[0], f32_to_f16(1.0f / 3.0f));
  double d[1] = {1.0};
  divide(DType::F64, d, 1, 3);
  EXPECT_EQ(d[0], 1.0 / 3.0);
}

TEST(RingReduce, UnsupportedDtypeThrows) {
  int64_t a = 1, b = 2;
  EXPECT_THROW(reduce(DType::I64, ReduceKind::Sum, &a, &a, &b, 1), std::invalid_argument);
  EXPECT_THROW(divide(DType::U8, &a, 1, 2), std::invalid_argument);
}

// ---- block partition ----

TEST(RingBlocks, CoverEveryElementOnceWithTheRemainderOnTheFirstBlocks) {
  for (int n : {1, 2, 3, 4, 7, 8}) {
    for (int64_t count : {0, 1, 2, 7, 8, 1023, 5003}) {
      int64_t next = 0;
      for (int i = 0; i < n; ++i) {
        ring::Block b = ring::ring_block(count, n, i);
        EXPECT_EQ(b.begin, next) << count << " / " << n << " block " << i;
        EXPECT_EQ(b.len, count / n + (i < count % n ? 1 : 0));
        next += b.len;
      }
      EXPECT_EQ(next, count);
    }
  }
  EXPECT_EQ(ring::lower_power_of_two(1), 1);
  EXPECT_EQ(ring::lower_power_of_two(7), 4);
  EXPECT_EQ(ring::lower_power_of_two(8), 8);
  EXPECT_EQ(ring::lower_power_of_two(9), 8);
}

// ---- Work and the single-process communicator ----

TEST(RingWork, WaitRethrowsTheErrorAndTimesOutWithTheDescription) {
  Work w(7, "ring allreduce #7 (f32, 3 elements, sum)");
  EXPECT_FALSE(w.is_completed());
  try {
    w.wait(0.05);
    FAIL() << "no timeout";
  } catch (const DpError& e) {
    EXPECT_NE(std::string(e.what()).find("ring allreduce #7 (f32, 3 elements, sum) [rank 0/1 on "),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("]: not completed after 0.05 s (wait timeout)"), std::string::npos)
        << e.what();
  }
  w.finish(std::make_exception_ptr(DpError("boom")));
  EXPECT_TRUE(w.is_completed());
  EXPECT_THROW(w.wait(), DpError);
  EXPECT_EQ(w.seq(), 7u);
}

TEST(RingWork, CollectiveDescriptionsNameEverything) {
  EXPECT_EQ(collective_description("ring", "allreduce", 12, DType::F32, 1048576, "sum", -1),
            "ring allreduce #12 (f32, 1048576 elements, sum)");
  EXPECT_EQ(collective_description("ring", "broadcast", 3, DType::BF16, 1, nullptr, 2),
            "ring broadcast #3 (bf16, 1 element, root 2)");
}

TEST(SingleProcessCommunicator, CollectivesAreIdentitiesWithSequenceNumbers) {
  SingleProcessCommunicator c;
  Tensor t = Tensor::zeros({3});
  t.fill_(2.5);
  EXPECT_EQ(c.allreduce_async(t, ReduceOp::Avg)->seq(), 1u);
  EXPECT_EQ(t.data<float>()[2], 2.5f);
  Tensor out = Tensor::zeros({3});
  c.allgather(t, out);
  EXPECT_EQ(out.data<float>()[1], 2.5f);
  c.reduce_scatter(t, out, ReduceOp::Max);
  c.broadcast(t, 0);
  EXPECT_EQ(c.barrier_async()->seq(), 5u);
  EXPECT_THROW(c.broadcast(t, 1), DpError);
  Tensor bad = Tensor::zeros({4});
  EXPECT_THROW(c.allgather(t, bad), DpError);
  Tensor i64 = Tensor::zeros({2}, DType::I64);
  EXPECT_THROW(c.allreduce(i64, ReduceOp::Sum), DpError);
  c.abort("done here");
  try {
    c.allreduce(t, ReduceOp::Sum);
    FAIL() << "no error after abort";
  } catch (const DpError& e) {
    EXPECT_NE(std::string(e.what()).find("single allreduce #"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the communicator was aborted: done here"), std::string::npos) << e.what();
  }
}

// A ring communicator of one rank: no sockets, every collective local, same contract.
// ---- mismatched collectives: the reason every rank reports ----

ring::Signature broadcast_sig(int root) {
  ring::CollectiveInfo info;
  info.kind = ring::Kind::Broadcast;
  info.dtype = DType::F32;
  info.algo = ring::Algo::BinomialTree;
  info.count = 10;
  info.root = root;
  return ring::signature_of(info);
}

TEST(RingMismatch, ReasonGroupsRanksAndNamesWhatDiffers) {
  const std::string tail =
      "; collectives must be issued in the same order, with the same dtype, size, op and root, on every rank";
  // Whichever rank detects it, in whatever order the answers come: the same words.
  EXPECT_EQ(ring::mismatch_reason(3, {{2, broadcast_sig(1)}, {0, broadcast_sig(0)}, {1, broadcast_sig(0)}}),
            "ranks 0, 1 issued broadcast (f32, 10 elements, root 0) as #3 while rank 2 issued broadcast (f32, 10 "
            "elements, root 1): the root differs" + tail);
  EXPECT_EQ(ring::mismatch_reason(3, {{0, broadcast_sig(0)}, {1, broadcast_sig(0)}}), "");  // no mismatch

  ring::Signature sum = broadcast_sig(-1), max;
  sum.kind = static_cast<uint8_t>(ring::Kind::Allreduce);
  sum.algo = static_cast<uint8_t>(ring::Algo::RecursiveDoubling);
  sum.op = static_cast<uint8_t>(ReduceOp::Sum) + 1;
  max = sum;
  max.op = static_cast<uint8_t>(ReduceOp::Max) + 1;
  max.dtype = static_cast<uint8_t>(DType::BF16);
  max.count = 12;
  EXPECT_EQ(ring::mismatch_reason(1, {{0, sum}, {1, max}, {2, broadcast_sig(0)}}),
            "rank 0 issued allreduce (f32, 10 elements, sum) as #1, rank 1 issued allreduce (bf16, 12 elements, max) "
            "while rank 2 issued broadcast (f32, 10 elements, root 0): the dtype, the element count, the reduction "
            "and the collective differ" + tail);
  ring::Signature ring_algo = sum;
  ring_algo.algo = static_cast<uint8_t>(ring::Algo::Ring);
  EXPECT_EQ(ring::mismatch_reason(7, {{1, ring_algo}, {0, sum}}),
            "rank 0 issued allreduce (f32, 10 elements, sum, algorithm recursive-doubling) as #7 while rank 1 issued "
            "allreduce (f32, 10 elements, sum, algorithm ring): the algorithm (DPTRAIN_RING_SMALL_BYTES differs "
            "between ranks) differs" + tail);
}

TEST(RingCommunicator, OneRankIsLocalAndChecksArguments) {
  ringtest::SharedState state{};
  ringtest::ForkBootstrap bs(&state, 0, 1, 5);
  auto c = make_ring_communicator(bs, 5.0);
  EXPECT_STREQ(c->backend(), "ring");
  Tensor t = Tensor::zeros({4}, DType::I32);
  t.data<int32_t>()[0] = 7;
  c->allreduce(t, ReduceOp::Avg);
  EXPECT_EQ(t.data<int32_t>()[0], 7);
  Tensor in = Tensor::zeros({4}, DType::I32), out = Tensor::zeros({4}, DType::I32);
  in.data<int32_t>()[3] = 9;
  c->reduce_scatter(in, out, ReduceOp::Sum);
  EXPECT_EQ(out.data<int32_t>()[3], 9);
  out.zero_();
  c->allgather(in, out);
  EXPECT_EQ(out.data<int32_t>()[3], 9);
  c->barrier();
  EXPECT_EQ(c->broadcast_async(t, 0)->seq(), 5u);
  EXPECT_THROW(c->broadcast(t, 1), DpError);
  Tensor f = Tensor::zeros({8});
  EXPECT_THROW(c->reduce_scatter(f, t, ReduceOp::Sum), DpError);  // dtypes differ
}

// ---- options from the tunables ----

// RingOptions' own defaults (tests build communicators from them) are the tunables' defaults
// (dptrain builds them from the environment), so the two behave alike.
TEST(RingOptions, DefaultsAreTheTunablesDefaults) {
  const RingOptions code;
  const RingOptions env =
      ring_options_from_tunables(read_tunables([](const char*) -> const char* { return nullptr; }), code.timeout_s);
  EXPECT_EQ(env.small_bytes, code.small_bytes);
  EXPECT_EQ(env.piece_bytes, code.piece_bytes);
  EXPECT_EQ(env.socket_buffer_bytes, code.socket_buffer_bytes);
  EXPECT_EQ(env.shm_fifo_bytes, code.shm_fifo_bytes);
  EXPECT_EQ(env.spin_us, code.spin_us);
  EXPECT_EQ(env.listen_host, code.listen_host);
  EXPECT_EQ(env.hierarchical, code.hierarchical);
  EXPECT_EQ(env.flight_records, code.flight_records);
}

TEST(RingOptions, TheRingTunablesSetTheirFields) {
  const std::map<std::string, std::string> vars = {
      {"DPTRAIN_RING_SMALL_BYTES", "1024"}, {"DPTRAIN_RING_PIECE_BYTES", "4096"}, {"DPTRAIN_RING_SOCKET_BUFFER", "0"},
      {"DPTRAIN_RING_SHM_BYTES", "0"},      {"DPTRAIN_RING_SPIN_US", "7.5"},      {"DPTRAIN_RING_HOST", "10.1.2.3"},
      {"DPTRAIN_RING_HIERARCHICAL", "0"},   {"DPTRAIN_FLIGHT_RECORDS", "64"}};
  const RingOptions o = ring_options_from_tunables(read_tunables([&](const char* name) -> const char* {
                                                     auto it = vars.find(name);
                                                     return it == vars.end() ? nullptr : it->second.c_str();
                                                   }),
                                                   12);
  EXPECT_EQ(o.timeout_s, 12);
  EXPECT_EQ(o.small_bytes, 1024u);
  EXPECT_EQ(o.piece_bytes, 4096u);
  EXPECT_EQ(o.socket_buffer_bytes, 0);
  EXPECT_EQ(o.shm_fifo_bytes, 0u);
  EXPECT_EQ(o.spin_us, 7.5);
  EXPECT_EQ(o.listen_host, "10.1.2.3");
  EXPECT_FALSE(o.hierarchical);
  EXPECT_EQ(o.flight_records, 64u);
}

}  // namespace
}  // namespace dp
