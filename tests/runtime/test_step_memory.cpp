// plan_step_memory (runtime/step_memory.h) on toy graphs whose layers declare what their backward
// keeps: each activation lives from its forward to its last reader (a forward, the loss, or a
// backward that keeps it), input gradients as the graph's backward writes them, the loss's tensors
// by precision, folded nodes sharing their host's bytes, and a packing that never overlaps two
// live tensors.
#include <gtest/gtest.h>

#include <map>

#include "runtime/graph.h"
#include "runtime/step_memory.h"

namespace dp {
namespace {

// Per-sample features [F]; never run: only its declaration matters.
class Toy final : public Layer {
 public:
  Toy(std::string name, BackwardNeeds needs, int inputs = 1, Follower f = Follower::Other, EpilogueSet absorbs = {})
      : Layer(std::move(name)), needs_(needs), inputs_(inputs), follower_(f), absorbs_(absorbs) {}
  const char* type() const override { return "toy"; }
  int num_inputs() const override { return inputs_; }
  Shape setup(const std::vector<Shape>& in) override { return in[0]; }
  BackwardNeeds backward_needs(const NeedsQuery& q) const override {
    BackwardNeeds n = needs_;
    if (q.epilogue == Epilogue::Relu) n.output = true, n.kept_bytes += bytes_of(q.out, q.dtype);
    return n;
  }
  Follower as_follower() const override { return follower_; }
  EpilogueSet applicable_epilogues(FusionPath) const override { return absorbs_; }

 protected:
  void forward_cpu(const StepContext&, const std::vector<Tensor>&, Tensor&) override {}
  void backward_cpu(const StepContext&, const std::vector<Tensor>&, const Tensor&, const Tensor&,
                    std::vector<Tensor>&) override {}

 private:
  BackwardNeeds needs_;
  int inputs_;
  Follower follower_;
  EpilogueSet absorbs_;
};

std::map<std::string, PlanTensor> by_name(const StepMemoryPlan& p) {
  std::map<std::string, PlanTensor> m;
  for (const PlanTensor& t : p.tensors) m[t.name] = t;
  return m;
}

// fc1 (keeps its input) -> relu (keeps its output) -> fc2 (keeps its input), F = 8 f32, batch 4:
// events fc1 0, relu 1, fc2 2, loss 3, backward fc2 4, relu 5, fc1 6.
Graph chain() {
  Graph g;
  g.add(std::make_unique<Toy>("fc1", BackwardNeeds{.input = true}));
  g.add(std::make_unique<Toy>("relu", BackwardNeeds{.output = true}, 1, Follower::Relu));
  g.add(std::make_unique<Toy>("fc2", BackwardNeeds{.input = true, .scratch_bytes = 1000}));
  g.build({8}, 0);
  return g;
}

TEST(StepMemory, LifetimesFollowWhatEachBackwardKeeps) {
  Graph g = chain();
  StepMemoryQuery q{.batch = 4, .fusion = unfused_plan(3), .alignment = 64};
  const StepMemoryPlan p = plan_step_memory(g, q);
  auto t = by_name(p);
  ASSERT_EQ(t.size(), 7u);  // fc2.scratch twice (forward, backward) under one name
  auto span = [&](const char* n) { return std::pair{t.at(n).first, t.at(n).last}; };
  EXPECT_EQ(span("fc1.out"), std::pair(0, 1));    // read by relu's forward only: relu keeps its output
  EXPECT_EQ(span("relu.out"), std::pair(1, 5));   // fc2's backward (its input) and relu's own
  EXPECT_EQ(span("fc2.out"), std::pair(2, 3));    // the loss
  EXPECT_EQ(span("relu.dout"), std::pair(4, 5));  // written by fc2's backward, read by relu's
  EXPECT_EQ(span("fc1.dout"), std::pair(5, 6));
  EXPECT_EQ(span("loss.dlogits_f32"), std::pair(3, 4));
  EXPECT_EQ(t.at("fc1.out").bytes, 4u * 8 * 4);
  EXPECT_EQ(t.at("fc2.scratch").bytes, 1000u);
  EXPECT_EQ(check_packing(p.tensors, p.packing, 64), "");
  EXPECT_GE(p.packing.arena_bytes, p.lower_bound);
  // Event 4 holds relu.out, relu.dout, loss.dlogits, fc2's scratch: 128 + 128 + 128 + 1024 (aligned).
  EXPECT_EQ(p.lower_bound, 128u * 3 + 1024);
}

TEST(StepMemory, SixteenBitActivationsAddTheLossCasts) {
  Graph g = chain();
  StepMemoryQuery q{.batch = 4, .activations = DType::BF16, .path = MemoryPath::Cuda, .fusion = unfused_plan(3)};
  auto t = by_name(plan_step_memory(g, q));
  EXPECT_EQ(t.at("fc1.out").bytes, 4u * 8 * 2);
  EXPECT_EQ(t.at("loss.logits_f32").bytes, 4u * 8 * 4);
  EXPECT_EQ(t.at("loss.dlogits_f32").bytes, 4u * 8 * 4);
  EXPECT_EQ(t.at("fc2.dout").bytes, 4u * 8 * 2);  // the gradient cast back for fc2's backward
}

TEST(StepMemory, AFoldedReluSharesItsHostsOutput) {
  Graph g;
  g.add(std::make_unique<Toy>("bn", BackwardNeeds{.input = true}, 1, Follower::Other, EpilogueSet{Epilogue::Relu}));
  g.add(std::make_unique<Toy>("relu", BackwardNeeds{.output = true}, 1, Follower::Relu));
  g.add(std::make_unique<Toy>("fc", BackwardNeeds{.input = true}));
  g.build({8}, 0);
  StepMemoryQuery q{.batch = 2, .path = MemoryPath::Cuda};
  q.fusion = device_fusion_plan(g, MemoryPath::Cuda, DType::F32, true, false);
  ASSERT_EQ(q.fusion[1].folded_into, 0);
  auto t = by_name(plan_step_memory(g, q));
  EXPECT_EQ(t.count("relu.out"), 0u);
  EXPECT_EQ(t.at("bn.out").first, 0);
  EXPECT_EQ(t.at("bn.out").last, 2 * 3 - 0);  // bn keeps its output under the Relu epilogue: its own backward
  EXPECT_EQ(t.at("bn.kept").bytes, 2u * 8 * 4);
  EXPECT_EQ(g.nodes()[0].layer->epilogue(), Epilogue::None);  // put back
}

// The GPU graph's arena (graph_tensors_only): the same outputs and input gradients at the same
// lifetimes, without what the layers keep, their scratch and the loss's tensors (a GPU's layers
// and trainer allocate those themselves), so it packs into fewer bytes.
TEST(StepMemory, TheGraphTensorsOnlyPlanHoldsTheOutputsAndInputGradients) {
  Graph g;
  g.add(std::make_unique<Toy>("fc1", BackwardNeeds{.input = true, .kept_bytes = 512}));
  g.add(std::make_unique<Toy>("relu", BackwardNeeds{.output = true}, 1, Follower::Relu));
  g.add(std::make_unique<Toy>("fc2", BackwardNeeds{.input = true, .scratch_bytes = 1000}));
  g.build({8}, 0);
  StepMemoryQuery q{.batch = 4, .activations = DType::BF16, .path = MemoryPath::Cuda, .fusion = unfused_plan(3),
                    .alignment = 64};
  const StepMemoryPlan all = plan_step_memory(g, q);
  q.graph_tensors_only = true;
  const StepMemoryPlan own = plan_step_memory(g, q);
  auto a = by_name(all), o = by_name(own);
  for (const char* gone : {"fc1.kept", "fc2.scratch", "loss.dlogits_f32", "loss.logits_f32", "fc2.dout"}) {
    EXPECT_EQ(a.count(gone), 1u) << gone;
    EXPECT_EQ(o.count(gone), 0u) << gone;
  }
  for (const char* kept : {"fc1.out", "relu.out", "fc2.out", "relu.dout", "fc1.dout"}) {
    ASSERT_EQ(o.count(kept), 1u) << kept;
    EXPECT_EQ(o.at(kept).bytes, a.at(kept).bytes) << kept;
    EXPECT_EQ(std::pair(o.at(kept).first, o.at(kept).last), std::pair(a.at(kept).first, a.at(kept).last)) << kept;
  }
  EXPECT_EQ(own.kept_of, (std::vector<int>{-1, -1, -1}));
  EXPECT_EQ(own.backward_scratch_of, (std::vector<int>{-1, -1, -1}));
  EXPECT_EQ(own.loss_gradient, -1);
  EXPECT_EQ(own.tensors.size(), 5u);
  EXPECT_EQ(check_packing(own.tensors, own.packing, 64), "");
  EXPECT_LT(own.packing.arena_bytes, all.packing.arena_bytes);
  // Event 5 (relu's backward) holds relu.out and relu.dout and writes fc1.dout, 64 bytes each: the
  // peak of the outputs and input gradients alone.
  EXPECT_EQ(own.lower_bound, 192u);
}

// What the CPU graph places (graph_arena): every tensor of the plan at the plan's own offset, the
// layers' kept bytes and scratch (fc2's 1000 bytes, one span per call) and the loss's gradient
// included, so the arena is the plan's activations exactly.
TEST(StepMemory, TheGraphsArenaIsThePlansPacking) {
  Graph g = chain();
  StepMemoryQuery q{.batch = 4, .fusion = unfused_plan(3), .alignment = 64};
  const StepMemoryPlan p = plan_step_memory(g, q);
  ASSERT_EQ(p.output_of.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(p.tensors[static_cast<size_t>(p.output_of[i])].name, g.nodes()[i].layer->name() + ".out");
  ASSERT_EQ(p.gradients_end - p.gradients_begin, 2u);  // relu.dout, fc1.dout
  EXPECT_EQ(p.tensors[p.gradients_begin].name, "relu.dout");
  EXPECT_EQ(p.kept_of, (std::vector<int>{-1, -1, -1}));
  EXPECT_EQ(p.forward_scratch_of[0], -1);
  ASSERT_GE(p.forward_scratch_of[2], 0);
  ASSERT_GE(p.backward_scratch_of[2], 0);
  EXPECT_EQ(p.tensors[static_cast<size_t>(p.forward_scratch_of[2])].first, 2);   // fc2's forward
  EXPECT_EQ(p.tensors[static_cast<size_t>(p.backward_scratch_of[2])].first, 4);  // fc2's backward
  EXPECT_EQ(p.tensors[static_cast<size_t>(p.loss_gradient)].name, "loss.dlogits_f32");
  EXPECT_EQ(p.input_copy, -1);  // a 1-D input is never copied

  const GraphArena a = graph_arena(p);
  EXPECT_EQ(a.bytes, p.packing.arena_bytes);
  ASSERT_EQ(a.gradient_offset.size(), 2u);
  EXPECT_EQ(a.gradient_bytes, (std::vector<size_t>{128, 128}));
  EXPECT_EQ(a.gradient_offset[0], p.packing.offsets[p.gradients_begin]);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(a.output_offset[i], p.packing.offsets[static_cast<size_t>(p.output_of[i])]);
  EXPECT_EQ(a.forward_scratch[2].bytes, 1000u);
  EXPECT_EQ(a.forward_scratch[2].offset, p.packing.offsets[static_cast<size_t>(p.forward_scratch_of[2])]);
  EXPECT_EQ(a.backward_scratch[2].offset, p.packing.offsets[static_cast<size_t>(p.backward_scratch_of[2])]);
  EXPECT_EQ(a.kept[0].offset, GraphArena::kNone);
  EXPECT_EQ(a.loss_gradient.bytes, 4u * 8 * 4);
  EXPECT_EQ(a.input_copy.offset, GraphArena::kNone);
  EXPECT_EQ(check_packing(p.tensors, p.packing, 64), "");
}

}  // namespace
}  // namespace dp
