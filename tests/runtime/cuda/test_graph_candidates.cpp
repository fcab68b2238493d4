// How a cuDNN graph-API plan is chosen (runtime/cuda/graph_candidates.h), on made-up heuristics
// lists and timings: the order A -> B -> fallback with repeats and over-workspace configs
// dropped, one order over a tier's descriptions, the median-of-repeats choice with its tie rule
// and failures, the no-plan error, and the plan cache (hits, a smaller workspace limit, a search
// that found nothing). No GPU needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/cuda/graph_candidates.h"

namespace dp::cuda {
namespace {

using ::testing::HasSubstr;

EngineCandidate cand(int index, HeurSource src, int64_t engine, std::vector<std::pair<int, int64_t>> knobs = {},
                     int alternative = 0, std::optional<int64_t> ws = std::nullopt) {
  EngineCandidate c;
  c.alternative = alternative;
  c.index = index;
  c.source = src;
  c.engine = engine;
  c.knobs = std::move(knobs);
  c.workspace = ws;
  return c;
}

std::vector<int> indices(const std::vector<EngineCandidate>& cs) {
  std::vector<int> out;
  for (const auto& c : cs) out.push_back(c.index);
  return out;
}

TEST(GraphCandidates, OrderIsModeAThenBThenFallbackWithRepeatsDropped) {
  // As the frontend enqueues them: A's list, then B's, then the fallback list, with engine 7
  // (knob 2 = 1) listed by all three and engine 7 with another knob choice listed by B only.
  const std::vector<EngineCandidate> listed = {
      cand(0, HeurSource::A, 7, {{2, 1}}), cand(1, HeurSource::A, 3),
      cand(2, HeurSource::B, 7, {{2, 1}}), cand(3, HeurSource::B, 7, {{2, 4}}), cand(4, HeurSource::B, 9),
      cand(5, HeurSource::Fallback, 3),    cand(6, HeurSource::Fallback, 11), cand(7, HeurSource::Fallback, 7, {{2, 1}})};
  EXPECT_EQ(indices(order_candidates(listed, 1 << 20)), (std::vector<int>{0, 1, 3, 4, 6}));
  // Listed out of order (fallback first): the source decides, stable within a source.
  std::vector<EngineCandidate> shuffled = {listed[6], listed[4], listed[0], listed[3], listed[1]};
  EXPECT_EQ(indices(order_candidates(shuffled, 1 << 20)), (std::vector<int>{0, 1, 4, 3, 6}));
}

TEST(GraphCandidates, ConfigsOverTheWorkspaceAreDroppedUnknownOnesKept) {
  const std::vector<EngineCandidate> listed = {cand(0, HeurSource::A, 1, {}, 0, int64_t{4096}),
                                               cand(1, HeurSource::A, 2, {}, 0, int64_t{4097}),
                                               cand(2, HeurSource::B, 3), cand(3, HeurSource::B, 4, {}, 0, int64_t{0})};
  EXPECT_EQ(indices(order_candidates(listed, 4096)), (std::vector<int>{0, 2, 3}));
  EXPECT_TRUE(fits_workspace(listed[0], 4096));
  EXPECT_FALSE(fits_workspace(listed[1], 4096));
  EXPECT_TRUE(fits_workspace(listed[2], 0));
}

TEST(GraphCandidates, SameEngineInAnotherDescriptionIsNotARepeat) {
  const std::vector<EngineCandidate> listed = {cand(0, HeurSource::A, 5, {}, 0), cand(0, HeurSource::A, 5, {}, 1)};
  EXPECT_EQ(order_candidates(listed, 1 << 20).size(), 2u);
}

TEST(GraphCandidates, InterleaveTakesOneFromEachDescriptionInTurn) {
  const std::vector<std::vector<EngineCandidate>> per_alt = {
      {cand(0, HeurSource::A, 1, {}, 0), cand(1, HeurSource::A, 2, {}, 0), cand(2, HeurSource::B, 3, {}, 0)},
      {cand(0, HeurSource::A, 4, {}, 1)},
      {}};
  const auto order = interleave_alternatives(per_alt);
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0].engine, 1);
  EXPECT_EQ(order[1].engine, 4);
  EXPECT_EQ(order[2].engine, 2);
  EXPECT_EQ(order[3].engine, 3);
  EXPECT_TRUE(interleave_alternatives({}).empty());
}

TEST(GraphCandidates, MedianOfRepeats) {
  EXPECT_DOUBLE_EQ(median_ms({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median_ms({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median_ms({0.5f}), 0.5);
  EXPECT_TRUE(std::isnan(median_ms({})));
}

CandidateTiming timed(int index, std::vector<float> ms, std::string failure = "") {
  return CandidateTiming{cand(index, HeurSource::A, index), "eng" + std::to_string(index), std::move(ms),
                         std::move(failure)};
}

TEST(GraphCandidates, TheLowestMedianWinsNotTheLowestSingleRun) {
  // Candidate 0 has the fastest single run (an outlier), candidate 1 the lowest median.
  const std::vector<CandidateTiming> t = {timed(0, {0.1f, 3.0f, 3.0f, 3.0f, 3.0f}), timed(1, {2.0f, 2.1f, 1.9f, 2.0f, 2.2f}),
                                          timed(2, {2.5f, 2.5f, 2.5f})};
  const auto c = choose_by_timing(t);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->position, 1u);
  EXPECT_DOUBLE_EQ(c->median, 2.0);
}

TEST(GraphCandidates, ATieGoesToTheEarlierCandidateFailuresAreSkipped) {
  const std::vector<CandidateTiming> t = {timed(0, {}, "CUDNN_STATUS_NOT_SUPPORTED"), timed(1, {1.0f, 1.0f, 1.0f}),
                                          timed(2, {1.0f, 1.0f, 1.0f}), timed(3, {0.5f}, "execute failed")};
  const auto c = choose_by_timing(t);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->position, 1u);
  // The same times in the other order: the other one wins, by position alone.
  const std::vector<CandidateTiming> swapped = {t[2], t[1]};
  EXPECT_EQ(choose_by_timing(swapped)->position, 0u);
}

TEST(GraphCandidates, NothingRanNothingChosen) {
  EXPECT_FALSE(choose_by_timing({}).has_value());
  EXPECT_FALSE(choose_by_timing({timed(0, {}, "no"), timed(1, {}, "no")}).has_value());
}

PlanKey some_key() {
  PlanKey k;
  k.op = GraphOp::ConvWgrad;
  k.math = MathMode::Fma;
  const std::array<int64_t, 4> x{8, 3, 32, 32}, dy{8, 16, 32, 32}, w{16, 3, 3, 3};
  k.conv = {1, 1, 1};
  k.tensors = {{x, packed_strides(x), DType::F32, 16}, {dy, packed_strides(dy), DType::F32, 16},
               {w, packed_strides(w), DType::F32, 4}};
  return k;
}

TEST(GraphCandidates, TheNoPlanErrorNamesTheLayerTheShapeAndEachFailure) {
  const std::string m = no_plan_message("layer 'conv1' (conv2d)", PlanChoiceKey{{{some_key()}}}, size_t{256} << 20,
                                        {timed(0, {}, "CUDNN_STATUS_NOT_SUPPORTED"), timed(4, {}, "needs 9999 bytes of workspace")},
                                        {"heuristics B for conv_wgrad ...: HEURISTIC_QUERY_FAILED"});
  EXPECT_THAT(m, HasSubstr("layer 'conv1' (conv2d): no cuDNN graph-API plan runs conv_wgrad f32 x[8,3,32,32] "
                           "dy[8,16,32,32] dw[16,3,3,3] align 4 pad 1 stride 1 fma math within the workspace limit of "
                           "256.0 MiB"));
  EXPECT_THAT(m, HasSubstr("eng0 (heuristics A): CUDNN_STATUS_NOT_SUPPORTED; eng4 (heuristics A): needs 9999 bytes"));
  EXPECT_THAT(m, HasSubstr("heuristics B for conv_wgrad ...: HEURISTIC_QUERY_FAILED"));
  EXPECT_THAT(m, HasSubstr("try a larger train.workspace_mb, or train.cudnn_api = \"legacy\""));
  EXPECT_THAT(no_plan_message("l", PlanChoiceKey{{{some_key()}}}, 0, {}, {}),
              HasSubstr("; cuDNN listed no engine config"));
}

TEST(GraphCandidates, DescribeChoiceNamesTheWinnerAndCounts) {
  std::vector<CandidateTiming> t = {timed(0, {2.0f, 2.0f, 2.0f}), timed(1, {1.0f, 1.0f, 1.0f}), timed(2, {}, "no")};
  t[1].candidate.workspace = 1024;
  const std::string d = describe_choice(some_key(), t[1], 1.0, t, 7);
  EXPECT_THAT(d, HasSubstr(": eng1 (heuristics A) (1.000 ms, median of 3; workspace 1024 bytes) from 2 timed, 1 "
                           "failed, 7 listed; others: eng0 2.000 ms"));
}

// A stand-in for GraphPlan: the cache needs only its workspace.
struct FakePlan {
  int64_t ws = 0;
  int id = 0;
  int64_t workspace_bytes() const { return ws; }
};

TEST(GraphPlanCache, ChoosesOncePerKeyAndAgainForASmallerWorkspaceLimit) {
  GraphPlanCache<FakePlan> cache;
  int made = 0;
  auto make = [&](int64_t ws) {
    return [&made, ws] {
      ++made;
      return std::make_shared<const FakePlan>(FakePlan{ws, made});
    };
  };
  const PlanChoiceKey a{{{some_key()}}};
  PlanKey other = some_key();
  other.tensors[0].dims[0] = 16;
  const PlanChoiceKey b{{{other}}};
  EXPECT_EQ(cache.get(a, 1000, make(800))->id, 1);
  EXPECT_EQ(cache.get(a, 1000, make(800))->id, 1);  // a hit: nothing made
  EXPECT_EQ(cache.get(b, 1000, make(100))->id, 2);
  EXPECT_EQ(cache.get(a, 900, make(500))->id, 1);   // still fits
  EXPECT_EQ(cache.get(a, 700, make(500))->id, 3);   // a smaller limit: chosen again
  EXPECT_EQ(cache.get(a, 1000, make(800))->id, 3);  // the new choice is kept
  EXPECT_EQ(made, 3);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(GraphPlanCache, ASearchThatFoundNothingIsNotRepeatedOtherErrorsAre) {
  GraphPlanCache<FakePlan> cache;
  const PlanChoiceKey a{{{some_key()}}};
  int searches = 0;
  auto none = [&]() -> std::shared_ptr<const FakePlan> {
    ++searches;
    throw NoGraphPlan("layer 'c': no cuDNN graph-API plan runs it");
  };
  EXPECT_THROW(cache.get(a, 1000, none), NoGraphPlan);
  try {
    cache.get(a, 1000, none);
    FAIL() << "expected NoGraphPlan";
  } catch (const NoGraphPlan& e) {
    EXPECT_STREQ(e.what(), "layer 'c': no cuDNN graph-API plan runs it");
  }
  EXPECT_EQ(searches, 1);
  EXPECT_THROW(cache.get(a, 2000, none), NoGraphPlan);  // another limit: searched again
  EXPECT_EQ(searches, 2);
  int failures = 0;
  auto broken = [&]() -> std::shared_ptr<const FakePlan> {
    ++failures;
    throw DpError("CUDA error");
  };
  PlanKey k = some_key();
  k.device = 1;
  EXPECT_THROW(cache.get(PlanChoiceKey{{{k}}}, 1000, broken), DpError);
  EXPECT_THROW(cache.get(PlanChoiceKey{{{k}}}, 1000, broken), DpError);
  EXPECT_EQ(failures, 2);
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace dp::cuda
