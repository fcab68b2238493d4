// ZeRO stage 2 (collectives/reducer/zero_shard.h) on 2 and 3 ranks of the ring, in forked
// processes: an MLP's gradient arena on its own page mapping, "backward" writing each layer's
// gradients and reporting them ready, the Reducer reduce-scattering each bucket and handing it to
// ZeroShard::release_grads as it completes (ReducerOptions::on_reduced). Then:
//   - every owned element holds exactly the all-reduce's bits (the release touches no piece);
//   - the arena's resident bytes (mincore) are the rank's pieces and partial pages only, at most
//     kept_grad_bytes_bound(), and that is what the memory account's gradients row says;
//   - zero_grads leaves the whole arena reading as zeros without faulting the released pages in,
//     and a second step gives the same bits again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/pages.h"
#include "collectives/reducer/reducer.h"
#include "collectives/reducer/zero_shard.h"
#include "collectives/ring/ring_communicator.h"
#include "models/build.h"
#include "runtime/memory_account.h"
#include "tests/collectives/ring_harness.h"

namespace dp {
namespace {

float grad_value(int rank, int64_t i, int step) {
  const uint32_t h = static_cast<uint32_t>(i * 2654435761u + rank * 40503u + step * 97u);
  return (static_cast<float>(h % 100003) / 7.0f - 7000.0f) * (1.0f + 0.37f * static_cast<float>(rank)) * 1e-3f;
}

ReducerOptions uneven_buckets() {
  ReducerOptions o;
  o.first_bucket_bytes = 3000, o.bucket_bytes = 90'000;  // uneven buckets of several pages
  o.shard = true;
  return o;
}

RingOptions ring_options(size_t small_bytes) {
  RingOptions ro;
  ro.timeout_s = 30;
  ro.small_bytes = small_bytes;
  return ro;
}

// One rank's setup, the same for both tests: its ring, the MLP on a page-mapped gradient arena
// (grads: its flat view), the arena's uneven buckets and the stage-2 shard of them. The test sets
// options.on_reduced and builds the Reducer.
struct Stage2Rank {
  Stage2Rank(Bootstrap& bs, ringtest::SharedState* state, int rank, size_t small_bytes = RingOptions{}.small_bytes)
      : s(state),
        r(rank),
        comm(make_ring_communicator(bs, ring_options(small_bytes))),
        grads_before(memory_breakdown().live[static_cast<size_t>(MemoryCategory::Gradients)]),
        g(models::build_model(mlp(), {1, 16, 16}, 1, Device::cpu(), DType::F32, nullptr, ArenaMemory::Paged)),
        grads(g->grads().flat()),
        options(uneven_buckets()),
        zero(*comm, reducer_buckets(*g, options), grads.numel(), 2) {}

  static ModelConfig mlp() {
    ModelConfig mc;
    mc.preset = PresetKind::Mlp;
    mc.hidden = {256, 100};
    return mc;
  }
  // The rank's failure: its report, exit status 1.
  int fail(const std::string& why) const {
    ringtest::report(s, r, why + "\n");
    return 1;
  }

  ringtest::SharedState* s;
  int r;
  std::unique_ptr<Communicator> comm;
  size_t grads_before;  // the memory account's gradients before the model's arena
  std::unique_ptr<Graph> g;
  Tensor grads;
  ReducerOptions options;
  ZeroShard zero;
};

int run_rank(Bootstrap& bs, ringtest::SharedState* s, int r) {
  Stage2Rank t(bs, s, r, /*small_bytes=*/4096);  // the smallest buckets run recursive doubling (the whole all-reduce)
  const int64_t n = t.grads.numel();
  size_t released = 0;
  int reported = 0;
  t.options.on_reduced = [&](int b) {
    released += t.zero.release_grads(b, t.grads);
    ++reported;
  };
  Reducer red(*t.comm, *t.g, t.options);
  if (red.buckets().size() < 3) return t.fail(fmt::format("only {} buckets", red.buckets().size()));
  if (resident_bytes(t.grads.raw(), t.grads.nbytes()) != 0) return t.fail("the fresh arena is resident");
  for (int step = 0; step < 2; ++step) {
    t.zero.zero_grads(t.grads);
    // Zero 0's bits, for the comparison: each bucket all-reduced.
    Tensor want = Tensor::zeros({n});
    for (int64_t i = 0; i < n; ++i) want.data<float>()[i] = grad_value(r, i, step);
    for (const Bucket& b : red.buckets()) t.comm->allreduce(want.slice_flat(b.begin, {b.end - b.begin}), ReduceOp::Avg);
    released = 0, reported = 0;
    red.prepare();
    for (int i = static_cast<int>(t.g->nodes().size()) - 1; i >= 0; --i) {
      const auto& node = t.g->nodes()[static_cast<size_t>(i)];
      if (node.param_slots.empty()) continue;
      for (int slot : node.param_slots) {
        const auto& sl = t.g->grads().slot(slot);
        float* p = t.grads.data<float>() + sl.offset;
        for (int64_t k = 0; k < sl.numel; ++k) p[k] += grad_value(r, sl.offset + k, step);  // accumulate, as layers do
      }
      red.on_ready(i);
    }
    red.finalize();
    if (reported != static_cast<int>(red.buckets().size()))
      return t.fail(fmt::format("step {}: {} of {} buckets reported reduced", step, reported, red.buckets().size()));
    const size_t resident = resident_bytes(t.grads.raw(), t.grads.nbytes());
    const auto bound = static_cast<size_t>(t.zero.kept_grad_bytes_bound());
    if (resident > bound)
      return t.fail(fmt::format("step {}: {} gradient bytes resident, more than the bound {}", step, resident, bound));
    if (released == 0 || resident + released < t.grads.nbytes() - page_size())
      return t.fail(
          fmt::format("step {}: released {} and resident {} of {}", step, released, resident, t.grads.nbytes()));
    const MemoryBreakdown mb = memory_breakdown();
    if (mb.live[static_cast<size_t>(MemoryCategory::Gradients)] - t.grads_before != resident)
      return t.fail(fmt::format("the account's gradients {} (of which {} before the model) against {} resident",
                                mb.live[static_cast<size_t>(MemoryCategory::Gradients)], t.grads_before, resident));
    for (const ShardPiece& pc : t.zero.layout().pieces)
      if (std::memcmp(t.grads.data<float>() + pc.arena_begin, want.data<float>() + pc.arena_begin,
                      static_cast<size_t>(pc.len) * sizeof(float)) != 0)
        return t.fail(fmt::format("step {}: bucket {}'s piece differs from the all-reduce", step, pc.bucket));
  }
  // zero_grads: zeros everywhere, nothing faulted in (check residency before reading the released parts).
  t.zero.zero_grads(t.grads);
  const size_t after = resident_bytes(t.grads.raw(), t.grads.nbytes());
  if (after > static_cast<size_t>(t.zero.kept_grad_bytes_bound()))
    return t.fail(fmt::format("zero_grads left {} bytes resident", after));
  for (int64_t i = 0; i < n; ++i)
    if (t.grads.data<float>()[i] != 0.0f) return t.fail(fmt::format("element {} is not zero after zero_grads", i));
  return 0;
}

// ZeroShard::measure_peak (base/pages.h's mincore, for the memory account): off, release_grads
// measures nothing and the account's peak for the arena stays what was last measured (0: the
// fresh arena); on, the first release measures the arena whole (every page written first).
int run_measure(Bootstrap& bs, ringtest::SharedState* s, int r) {
  Stage2Rank t(bs, s, r);
  t.options.on_reduced = [&](int b) { t.zero.release_grads(b, t.grads); };
  Reducer red(*t.comm, *t.g, t.options);
  const size_t whole = (t.grads.nbytes() + page_size() - 1) / page_size() * page_size();
  for (bool on : {false, true}) {
    t.zero.measure_peak(on);
    reset_memory_peak();  // the arena's peak: what is resident now (its kept pages, or nothing)
    const size_t before = resident_bytes(t.grads.raw(), t.grads.nbytes());
    std::memset(t.grads.raw(), 1, t.grads.nbytes());  // every page resident, as a backward would leave it
    red.prepare();
    for (int i = static_cast<int>(t.g->nodes().size()) - 1; i >= 0; --i) red.on_ready(i);
    red.finalize();
    const size_t peak = memory_breakdown().peak;  // measures the (released) arena now, then adds its peak
    const MappedUse m = memory_sample_mapped(t.grads.raw());
    if (m.peak != (on ? whole : std::max(before, m.resident)))
      return t.fail(fmt::format("measure_peak {}: the arena's peak {} (whole {}, resident {}, before {})", on, m.peak,
                                whole, m.resident, before));
    if (peak < m.peak) return t.fail(fmt::format("the account's peak {} below the arena's {}", peak, m.peak));
  }
  return 0;
}

TEST(ZeroStage2, MeasurePeakOffMeasuresNothingAtTheReleases) {
  const auto results = ringtest::run_ranks(2, run_measure, 60);
  EXPECT_EQ(ringtest::all_exited_with(results, 0), "");
}

TEST(ZeroStage2, OwnedPiecesExactReleasedPagesGoneZeroGradFaultsNothingIn) {
  for (int n : {2, 3}) {
    const auto results = ringtest::run_ranks(n, run_rank, 60);
    EXPECT_EQ(ringtest::all_exited_with(results, 0), "") << n << " ranks";
  }
}

}  // namespace
}  // namespace dp
