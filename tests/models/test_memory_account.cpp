// The memory breakdown (runtime/memory_account.h) on the CPU: every category's live bytes equal
// what the shapes give by hand, for a small MLP trained one step, and they sum to the total.
#include <gtest/gtest.h>

#include "runtime/graph.h"
#include "runtime/memory_account.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/sgd.h"
#include "tests/models/layer_harness.h"

namespace dp::test {
namespace {

using A = std::map<std::string, ArgValue>;
ArgValue I(int64_t v) { return ArgValue{v}; }
size_t at(const MemoryBreakdown& b, MemoryCategory c) { return b.live[static_cast<size_t>(c)]; }

// Bytes of each category added between two breakdowns.
std::array<size_t, kMemoryCategories> delta(const MemoryBreakdown& before, const MemoryBreakdown& after) {
  std::array<size_t, kMemoryCategories> d{};
  for (size_t i = 0; i < d.size(); ++i) d[i] = after.live[i] - before.live[i];
  return d;
}

// in 20 -> fc1 30 -> relu -> fc2 10, batch 4, f32, the reference CPU kernels (no fused relu).
void add_mlp(Graph& g) {
  g.add(make_layer("linear", {{"out_features", I(30)}}, "fc1"));
  g.add(make_layer("relu", {}, "relu"));
  g.add(make_layer("linear", {{"out_features", I(10)}}, "fc2"));
}
constexpr size_t kParams = 20 * 30 + 30 + 30 * 10 + 10;  // 940
constexpr size_t kBatch = 4;

TEST(MemoryAccount, MlpCategoriesMatchTheShapes) {
  const MemoryBreakdown start = memory_breakdown();
  Graph g;
  add_mlp(g);
  g.set_cpu_backend(CpuBackend::Reference);
  g.build({20}, /*seed=*/3);
  const MemoryBreakdown built = memory_breakdown();
  auto d = delta(start, built);
  EXPECT_EQ(d[static_cast<size_t>(MemoryCategory::Parameters)], kParams * 4);
  EXPECT_EQ(d[static_cast<size_t>(MemoryCategory::Gradients)], kParams * 4);
  EXPECT_EQ(d[static_cast<size_t>(MemoryCategory::ComputeParams)], 0u);  // f32: no 16-bit copies
  EXPECT_EQ(d[static_cast<size_t>(MemoryCategory::ComputeGrads)], 0u);

  optim::AdamW adam(static_cast<int64_t>(kParams), optim::AdamWOptions{});
  EXPECT_EQ(at(memory_breakdown(), MemoryCategory::OptimizerState) - at(built, MemoryCategory::OptimizerState),
            2 * kParams * 4);  // exp_avg, exp_avg_sq
  {
    optim::Sgd sgd(static_cast<int64_t>(kParams), optim::SgdOptions{.momentum = 0.9});
    EXPECT_EQ(at(memory_breakdown(), MemoryCategory::OptimizerState) - at(built, MemoryCategory::OptimizerState),
              3 * kParams * 4);  // + the momentum buffer
  }
  EXPECT_EQ(at(memory_breakdown(), MemoryCategory::OptimizerState) - at(built, MemoryCategory::OptimizerState),
            2 * kParams * 4);  // freed with the optimizer

  Tensor x = Tensor::zeros({static_cast<int64_t>(kBatch), 20});
  x.fill_(0.5);
  Tensor dy = Tensor::zeros({static_cast<int64_t>(kBatch), 10});
  dy.fill_(1.0);
  const MemoryBreakdown before_step = memory_breakdown();
  StepContext ctx;
  for (int step = 0; step < 2; ++step) {  // the second step allocates nothing
    g.forward(ctx, x);
    g.backward(ctx, dy);
    d = delta(before_step, memory_breakdown());
    SCOPED_TRACE(step);
    // The CPU's step arena (runtime/graph_step_arena.cpp), the outputs and the input gradients at
    // the step plan's 256-byte offsets: fc1.out, relu.out, relu.dout, fc1.dout ([4, 30], 480
    // bytes) and fc2.out ([4, 10], 160). At most three are live at once (relu's backward: relu.out,
    // relu.dout, fc1.dout), and the others share their slots (fc1.out, fc2.out and relu.dout are
    // never live together): 3 x 512 bytes, where the outputs alone took 4 x 70 x 4 = 1120.
    EXPECT_EQ(d[static_cast<size_t>(MemoryCategory::Activations)], 3 * 512);
    EXPECT_EQ(g.step_arena_bytes(), 3 * 512u);
    EXPECT_EQ(d[static_cast<size_t>(MemoryCategory::InputGradients)], 0u);  // in the step arena
    EXPECT_EQ(d[static_cast<size_t>(MemoryCategory::LayerState)], 0u);  // linear and relu save nothing extra
    EXPECT_EQ(d[static_cast<size_t>(MemoryCategory::Parameters)], 0u);
  }
  // Per node: nothing (the step arena belongs to no node: the graph plans it for all, and linear
  // and relu allocate nothing of their own).
  EXPECT_EQ(memory_by_node(10), (std::vector<std::pair<int, size_t>>{}));
  const MemoryBreakdown end = memory_breakdown();
  size_t sum = 0;
  for (size_t v : end.live) sum += v;
  EXPECT_EQ(sum, end.total);
  EXPECT_GE(end.peak, end.total);
}

TEST(MemoryAccount, ScopesNestAndFreedBytesAreCredited) {
  const MemoryBreakdown start = memory_breakdown();
  {
    MemoryScope outer(MemoryCategory::Activations);
    Tensor a = Tensor::zeros({10});  // 40 bytes, activations
    {
      MemoryScope inner(MemoryCategory::LayerState);
      Tensor b = Tensor::zeros({3}, DType::F64);  // 24 bytes, layer state
      EXPECT_EQ(at(memory_breakdown(), MemoryCategory::LayerState) - at(start, MemoryCategory::LayerState), 24u);
    }
    EXPECT_EQ(at(memory_breakdown(), MemoryCategory::LayerState), at(start, MemoryCategory::LayerState));
    Tensor c = Tensor::zeros({5});  // back in the outer scope
    EXPECT_EQ(at(memory_breakdown(), MemoryCategory::Activations) - at(start, MemoryCategory::Activations), 60u);
    EXPECT_EQ(current_memory_category(), MemoryCategory::Activations);
  }
  EXPECT_EQ(current_memory_category(), MemoryCategory::Other);
  EXPECT_EQ(memory_breakdown().total, start.total);
}

TEST(MemoryAccount, TableAndJsonNameEveryCategory) {
  MemoryBreakdown b;
  b.live[static_cast<size_t>(MemoryCategory::Parameters)] = 1 << 20;
  b.live[static_cast<size_t>(MemoryCategory::Activations)] = 3 << 20;
  b.total = 4 << 20;
  b.peak = 5 << 20;
  EXPECT_EQ(memory_json(b, 1, 0, 0),
            "{\"split\":\"memory\",\"step\":1,\"other\":0,\"parameters\":1048576,\"compute_params\":0,"
            "\"gradients\":0,\"compute_grads\":0,\"optimizer_state\":0,\"activations\":3145728,"
            "\"input_gradients\":0,\"layer_state\":0,\"input\":0,\"total\":4194304,\"peak\":5242880}");
  const std::string t = memory_table(b, 6 << 20, 7 << 20);
  EXPECT_NE(t.find("activations             3145728        3.0  75.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("not in the account: 2.0 MiB"), std::string::npos) << t;
  EXPECT_NE(t.find("\ninput                         0        0.0   0.0%\n"), std::string::npos) << t;  // the last row
  EXPECT_EQ(memory_category_name(MemoryCategory::Input), std::string("input"));
}

}  // namespace
}  // namespace dp::test
