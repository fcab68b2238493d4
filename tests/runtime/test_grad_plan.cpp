// The backward schedule and the input-gradient plan (runtime/grad_plan.h): which buffer each
// layer's dx goes to, how long it lives, and how few bytes the gradients in flight need.
#include "runtime/grad_plan.h"

#include <gtest/gtest.h>

namespace dp {
namespace {

using Kind = BackwardStep::Kind;

std::vector<NodePlan> unfused(size_t n) { return unfused_plan(n); }

TEST(BackwardSchedule, UnfusedRunsEveryNodeFromTheLast) {
  const std::vector<BackwardStep> want{{Kind::Run, 2}, {Kind::Run, 1}, {Kind::Run, 0}};
  EXPECT_EQ(backward_schedule(unfused(3)), want);
}

// bn (0) -> add (1, folded into bn, which runs at the add's position) -> relu (2, folded into bn)
// -> head (3): the head runs, the relu's gradient moves to bn, the add's too, bn runs where the
// add was.
TEST(BackwardSchedule, FoldedNodesHandTheirGradientToTheHostWhichRunsAtItsPosition) {
  std::vector<NodePlan> p = unfused(4);
  p[0].runs_at = 1;
  p[1].folded_into = 0, p[1].runs_at = -1;
  p[2].folded_into = 0, p[2].runs_at = -1;
  const std::vector<BackwardStep> want{
      {Kind::Run, 3}, {Kind::Move, 2, 0}, {Kind::Move, 1, 0}, {Kind::Run, 0}};
  EXPECT_EQ(backward_schedule(p), want);
}

// A chain of 4 equal layers (input -> a -> b -> c -> d): d's gradient is the caller's; c's is
// written by d's run and read by c's; at most two gradients are live in one run, so the arena is
// two buffers, not three.
TEST(InputGradientPlan, AChainNeedsTwoBuffersWhateverItsLength) {
  const std::vector<std::vector<int>> src{{-1}, {0}, {1}, {2}};
  const std::vector<size_t> bytes{1000, 1000, 1000, 1000};
  const std::vector<std::string> names{"a", "b", "c", "d"};
  const auto sched = backward_schedule(unfused(4));
  const GradientPlan gp = plan_input_gradients(sched, src, bytes, names, 256);
  ASSERT_EQ(gp.tensors.size(), 3u);  // c, b, a's gradients; none for the model input
  EXPECT_EQ(gp.tensors[0].name, "c.dout");
  EXPECT_EQ(gp.tensors[0].first, 0);  // written by d's run (run 0)
  EXPECT_EQ(gp.tensors[0].last, 1);   // read by c's (run 1)
  EXPECT_EQ(gp.tensors[2].name, "a.dout");
  EXPECT_EQ(gp.tensors[2].first, 2);
  EXPECT_EQ(gp.tensors[2].last, 3);
  EXPECT_EQ(gp.dx_buffer[3], std::vector<int>{-1});  // a's run: the model input has no gradient
  EXPECT_EQ(gp.packing.arena_bytes, 2u * 1024);      // two 1000-byte buffers at 256-byte alignment
  EXPECT_EQ(gp.packing.offsets[0], gp.packing.offsets[2]);  // c's and a's never live together
  EXPECT_EQ(check_packing(gp.tensors, gp.packing, 256), "");
}

// A residual join: x (0) -> f (1) -> add(f, x) (2) -> head (3). add's run writes f's gradient and
// x's (first); f's run writes a summand for x, added into x's gradient and dead at once.
TEST(InputGradientPlan, ASecondConsumersGradientIsASummandThatDiesInItsRun) {
  const std::vector<std::vector<int>> src{{-1}, {0}, {1, 0}, {2}};
  const std::vector<size_t> bytes{400, 400, 400, 40};
  const std::vector<std::string> names{"x", "f", "add", "head"};
  const GradientPlan gp = plan_input_gradients(backward_schedule(unfused(4)), src, bytes, names, 1);
  // Runs: head (0) writes add.dout; add (1) writes f.dout and x.dout; f (2) writes x.dx_sum; x (3).
  ASSERT_EQ(gp.tensors.size(), 4u);
  EXPECT_EQ(gp.tensors[0].name, "add.dout");
  EXPECT_EQ(gp.tensors[1].name, "f.dout");
  EXPECT_EQ(gp.tensors[2].name, "x.dout");
  EXPECT_EQ(gp.tensors[3].name, "x.dx_sum");
  EXPECT_EQ(std::make_pair(gp.tensors[2].first, gp.tensors[2].last), std::make_pair(1, 3));
  EXPECT_EQ(std::make_pair(gp.tensors[3].first, gp.tensors[3].last), std::make_pair(2, 2));
  EXPECT_EQ(gp.dx_is_first[1], (std::vector<char>{1, 1}));
  EXPECT_EQ(gp.dx_is_first[2], (std::vector<char>{0}));
  EXPECT_EQ(gp.dx_buffer[2], std::vector<int>{3});
  // Run 1 holds add.dout, f.dout and x.dout; run 2 holds f.dout, x.dout and the summand.
  EXPECT_EQ(gp.packing.arena_bytes, peak_live_bytes(gp.tensors, 1));
  EXPECT_EQ(gp.packing.arena_bytes, 1200u);
  EXPECT_EQ(check_packing(gp.tensors, gp.packing, 1), "");
}

// The folded plan of the schedule test: the relu's consumer (head) writes the relu's gradient,
// which moves to bn (its host) and is read by bn's run.
TEST(InputGradientPlan, AFoldedNodesGradientIsReadByItsHost) {
  std::vector<NodePlan> p = unfused(4);
  p[0].runs_at = 1;
  p[1].folded_into = 0, p[1].runs_at = -1;
  p[2].folded_into = 0, p[2].runs_at = -1;
  const std::vector<std::vector<int>> src{{-1}, {0, -1}, {1}, {2}};
  const std::vector<size_t> bytes{64, 64, 64, 8};
  const std::vector<std::string> names{"bn", "add", "relu", "head"};
  const GradientPlan gp = plan_input_gradients(backward_schedule(p), src, bytes, names, 1);
  ASSERT_EQ(gp.tensors.size(), 1u);  // bn runs with the model input only: no gradient of its own
  EXPECT_EQ(gp.tensors[0].name, "relu.dout");
  EXPECT_EQ(std::make_pair(gp.tensors[0].first, gp.tensors[0].last), std::make_pair(0, 1));
}

}  // namespace
}  // namespace dp
