// Bucket assignment (pure) and the Reducer's lifecycle over the single-process communicator.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "collectives/reducer/reducer.h"
#include "base/half.h"
#include "models/build.h"

namespace dp {
namespace {

TEST(AssignBuckets, ReverseOrderFirstSmallThenLarge) {
  // slots: 10, 20, 30, 40, 50 elements; arena offsets 0, 10, 30, 60, 100, end 150
  auto b = assign_buckets({10, 20, 30, 40, 50}, /*first_cap=*/50, /*cap=*/60);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].slots, (std::vector<int>{4}));  // 50 >= 50: closes at once
  EXPECT_EQ(b[0].begin, 100);
  EXPECT_EQ(b[0].end, 150);
  EXPECT_EQ(b[1].slots, (std::vector<int>{3, 2}));  // 40 + 30 >= 60
  EXPECT_EQ(b[1].begin, 30);
  EXPECT_EQ(b[1].end, 100);
  EXPECT_EQ(b[2].slots, (std::vector<int>{1, 0}));  // the rest
  EXPECT_EQ(b[2].begin, 0);
  EXPECT_EQ(b[2].end, 30);
}

TEST(AssignBuckets, CoversTheArenaExactlyAndNeverSplitsASlot) {
  std::vector<int64_t> n = {7, 1, 300, 2, 2, 9000, 5, 64};
  for (int64_t first : {1, 100, 100000})
    for (int64_t cap : {1, 50, 4096, 1000000}) {
      auto b = assign_buckets(n, first, cap);
      int64_t end = 7 + 1 + 300 + 2 + 2 + 9000 + 5 + 64;
      for (const auto& bk : b) {
        EXPECT_EQ(bk.end, end) << "contiguous, from the end of the arena backwards";
        end = bk.begin;
      }
      EXPECT_EQ(end, 0);
    }
  EXPECT_TRUE(assign_buckets({}, 1, 1).empty());
}

// The reducer tests' model: an MLP on 1 x 4 x 4 inputs with these hidden widths.
std::unique_ptr<Graph> small_mlp(std::vector<int64_t> hidden) {
  ModelConfig mc;
  mc.preset = PresetKind::Mlp;
  mc.hidden = std::move(hidden);
  return models::build_model(mc, {1, 4, 4}, 1);
}

// Buckets small enough that small_mlp's gradients make several.
ReducerOptions small_buckets() {
  ReducerOptions o;
  o.first_bucket_bytes = 64, o.bucket_bytes = 256;
  return o;
}

TEST(Reducer, CountsReadyGradientsAndNamesAMissingOne) {
  auto g = small_mlp({8, 8});
  SingleProcessCommunicator comm;
  ReducerOptions o = small_buckets();
  Reducer r(comm, *g, o);
  ASSERT_GE(r.buckets().size(), 2u);
  r.prepare();
  for (int i = static_cast<int>(g->nodes().size()) - 1; i >= 0; --i)
    if (!g->nodes()[i].param_slots.empty()) r.on_ready(i);
  EXPECT_NO_THROW(r.finalize());
  r.prepare();
  r.on_ready(static_cast<int>(g->nodes().size()) - 1);  // only the last layer reported
  try {
    r.finalize();
    FAIL() << "no error";
  } catch (const DpError& e) {
    EXPECT_NE(std::string(e.what()).find("these parameters got no gradient this step: fc1.weight, fc1.bias, "
                                         "fc2.weight, fc2.bias; every parameter must take part in the loss (or set "
                                         "dist.allow_unused = true to reduce them as zeros)"),
              std::string::npos)
        << e.what();
  }
  // With allow_unused the same step reduces.
  o.allow_unused = true;
  Reducer lenient(comm, *g, o);
  lenient.prepare();
  lenient.on_ready(static_cast<int>(g->nodes().size()) - 1);
  EXPECT_NO_THROW(lenient.finalize());
  EXPECT_EQ(lenient.last_step().buckets.size(), lenient.buckets().size());
}

// on_reduced hears of every bucket once per step, as its reduction completes: over one rank a
// bucket is done when it is launched, so each is reported at the on_ready that completed it.
TEST(Reducer, OnReducedReportsEachBucketOncePerStepAsItCompletes) {
  auto g = small_mlp({8, 8});
  SingleProcessCommunicator comm;
  ReducerOptions o = small_buckets();
  std::vector<int> calls;
  o.on_reduced = [&](int b) { calls.push_back(b); };
  Reducer r(comm, *g, o);
  ASSERT_GE(r.buckets().size(), 2u);
  for (int step = 0; step < 2; ++step) {
    calls.clear();
    r.prepare();
    for (int i = static_cast<int>(g->nodes().size()) - 1; i >= 0; --i)
      if (!g->nodes()[i].param_slots.empty()) {
        r.on_ready(i);
        // Bucket 0 holds the last layer's gradients: reported at once.
        if (i == static_cast<int>(g->nodes().size()) - 1) {
          EXPECT_EQ(calls, std::vector<int>{0});
        }
      }
    r.finalize();
    std::vector<int> want;
    for (size_t b = 0; b < r.buckets().size(); ++b) want.push_back(static_cast<int>(b));
    EXPECT_EQ(calls, want) << "step " << step;
  }
  o.wire = DType::BF16;  // the widening comes after the wait: not "reduced" at completion
  EXPECT_THROW(Reducer(comm, *g, o), DpError);
}

// Compressed buckets travel in 16 bits: over one rank the average is the identity, so each
// gradient comes back as exactly its 16-bit rounding.
TEST(Reducer, CompressedGradientsComeBackRoundedTo16Bits) {
  auto g = small_mlp({8});
  SingleProcessCommunicator comm;
  for (DType wire : {DType::BF16, DType::F16}) {
    ReducerOptions o = small_buckets();
    o.wire = wire;
    Reducer r(comm, *g, o);
    float* gr = g->grads().flat().data<float>();
    const int64_t n = g->grads().flat().numel();
    std::vector<float> before(n);
    for (int64_t i = 0; i < n; ++i) before[i] = gr[i] = 0.001f * static_cast<float>(i % 997) - 0.37f;
    r.prepare();
    for (int i = static_cast<int>(g->nodes().size()) - 1; i >= 0; --i)
      if (!g->nodes()[i].param_slots.empty()) r.on_ready(i);
    r.finalize();
    int64_t changed = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = wire == DType::BF16 ? kernels::cpu::bf16_to_f32(kernels::cpu::f32_to_bf16(before[i]))
                                             : kernels::cpu::f16_to_f32(kernels::cpu::f32_to_f16(before[i]));
      ASSERT_EQ(gr[i], want) << dtype_name(wire) << " element " << i;
      changed += gr[i] != before[i];
    }
    EXPECT_GT(changed, n / 2) << "the values were rounded";
  }
}

}  // namespace
}  // namespace dp
