// The graph running the GPU plan's folds (runtime/fusion_plan.h), checked on the CPU with toy
// layers that apply the epilogues themselves (Graph::use_plan_for_testing): a fused graph computes
// bit for bit what the unfused one does (output, every parameter gradient), hosts with a residual
// run at their add's position after the residual's producer, folded nodes are not run and not
// reported to the observer, every layer with parameters reports "gradients ready" exactly once, and
// folded_into names each fold's host.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "runtime/graph.h"
#include "runtime/graph_observer.h"

namespace dp {
namespace {

InitFn constant(float v) {
  return [v](Tensor& t, Rng&) { t.data<float>()[0] = v; };
}

// Per-sample features [F]; the toy layers work on f32 [N, F] tensors on the CPU.
class ToyLayer : public Layer {
 public:
  using Layer::Layer;
  Shape setup(const std::vector<Shape>& in) override { return in[0]; }
};

// y = w x (one parameter).
class Scale final : public ToyLayer {
 public:
  Scale(std::string name, float w) : ToyLayer(std::move(name)), w0_(w) {}
  const char* type() const override { return "scale"; }
  std::vector<ParamDecl> declare_params() const override { return {{"weight", {1}, true, DType::F32, constant(w0_)}}; }

 protected:
  void forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) override {
    const float w = params_[0].data<float>()[0];
    for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = w * x[0].data<float>()[i];
  }
  void backward_cpu(const StepContext&, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                    std::vector<Tensor>& dx) override {
    const float w = params_[0].data<float>()[0];
    float dw = 0;
    for (int64_t i = 0; i < dy.numel(); ++i) dw += dy.data<float>()[i] * x[0].data<float>()[i];
    grads_[0].data<float>()[0] += dw;
    if (dx[0].defined())
      for (int64_t i = 0; i < dy.numel(); ++i) dx[0].data<float>()[i] = w * dy.data<float>()[i];
  }

 private:
  float w0_;
};

// A batch norm's stand-in: y = epilogue(w x - 0.5 [+ r]), with the epilogue applied here on the CPU
// (the real layers only on the GPU).
class ToyNorm final : public ToyLayer {
 public:
  ToyNorm(std::string name, float w) : ToyLayer(std::move(name)), w0_(w) {}
  const char* type() const override { return "toynorm"; }
  EpilogueSet applicable_epilogues(FusionPath path) const override {
    return path == FusionPath::CpuOnednn ? EpilogueSet{} : EpilogueSet{Epilogue::Relu, Epilogue::AddRelu};
  }
  std::vector<ParamDecl> declare_params() const override { return {{"weight", {1}, true, DType::F32, constant(w0_)}}; }

 protected:
  void forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) override {
    const float w = params_[0].data<float>()[0];
    for (int64_t i = 0; i < y.numel(); ++i) {
      float v = w * x[0].data<float>()[i] - 0.5f;
      if (epilogue() == Epilogue::AddRelu) v = v + x[1].data<float>()[i];
      if (epilogue() != Epilogue::None) v = v > 0 ? v : 0.0f;
      y.data<float>()[i] = v;
    }
  }
  void backward_cpu(const StepContext&, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                    std::vector<Tensor>& dx) override {
    const float w = params_[0].data<float>()[0];
    float dw = 0;
    for (int64_t i = 0; i < dy.numel(); ++i) {
      const float g = epilogue() != Epilogue::None && !(y.data<float>()[i] > 0) ? 0.0f : dy.data<float>()[i];
      dw += g * x[0].data<float>()[i];
      if (dx[0].defined()) dx[0].data<float>()[i] = w * g;
      if (dx.size() > 1 && dx[1].defined()) dx[1].data<float>()[i] = g;
    }
    grads_[0].data<float>()[0] += dw;
  }

 private:
  float w0_;
};

class ToyRelu final : public ToyLayer {
 public:
  using ToyLayer::ToyLayer;
  const char* type() const override { return "relu"; }
  Follower as_follower() const override { return Follower::Relu; }

 protected:
  void forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) override {
    for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = std::max(x[0].data<float>()[i], 0.0f);
  }
  void backward_cpu(const StepContext&, const std::vector<Tensor>&, const Tensor& y, const Tensor& dy,
                    std::vector<Tensor>& dx) override {
    for (int64_t i = 0; i < dy.numel(); ++i) dx[0].data<float>()[i] = y.data<float>()[i] > 0 ? dy.data<float>()[i] : 0.0f;
  }
};

class ToyAdd final : public ToyLayer {
 public:
  using ToyLayer::ToyLayer;
  const char* type() const override { return "add"; }
  int num_inputs() const override { return 2; }
  Follower as_follower() const override { return Follower::Add; }

 protected:
  void forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) override {
    for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = x[0].data<float>()[i] + x[1].data<float>()[i];
  }
  void backward_cpu(const StepContext&, const std::vector<Tensor>&, const Tensor&, const Tensor& dy,
                    std::vector<Tensor>& dx) override {
    for (auto& d : dx)
      if (d.defined()) d.copy_from(dy);
  }
};

// Two residual blocks (the second with a downsampling-like shortcut whose norm comes after the
// main branch's): nodes
//   0 s0 <- input      1 n1 <- 0      2 r2 <- 1 (folds into n1)
//   3 n3 <- 2          4 a4 = 3 + 2   5 r5 <- 4 (a4, r5 fold into n3; residual r2)
//   6 n6 <- 5          7 s7 <- 5      8 n8 <- 7
//   9 a9 = 6 + 8       10 r10 <- 9 (a9, r10 fold into n6, which runs at 9; residual n8)
//   11 s11 <- 10
std::unique_ptr<Graph> two_blocks() {
  auto g = std::make_unique<Graph>();
  g->add(std::make_unique<Scale>("s0", 1.5f), {"input"});
  g->add(std::make_unique<ToyNorm>("n1", 0.75f));
  g->add(std::make_unique<ToyRelu>("r2"));
  g->add(std::make_unique<ToyNorm>("n3", 1.25f));
  g->add(std::make_unique<ToyAdd>("a4"), {"n3", "r2"});
  g->add(std::make_unique<ToyRelu>("r5"));
  g->add(std::make_unique<ToyNorm>("n6", 1.5f));
  g->add(std::make_unique<Scale>("s7", 0.8f), {"r5"});
  g->add(std::make_unique<ToyNorm>("n8", 1.1f));
  g->add(std::make_unique<ToyAdd>("a9"), {"n6", "n8"});
  g->add(std::make_unique<ToyRelu>("r10"));
  g->add(std::make_unique<Scale>("s11", 0.9f));
  g->build({16}, 3);
  return g;
}

struct Recorder final : GraphObserver {
  std::vector<std::string> seen;
  void node_begin(int node, bool backward) override { seen.push_back(fmt::format("{}{}", backward ? "b" : "f", node)); }
  void node_end(int node, bool backward) override { seen.push_back(fmt::format("/{}{}", backward ? "b" : "f", node)); }
};

Tensor filled(const Shape& s, float scale) {
  Tensor t = Tensor::zeros(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * static_cast<float>((i * 37) % 23 - 11);
  return t;
}

TEST(GraphFusion, AFusedGraphComputesWhatTheUnfusedOneDoesBitForBit) {
  auto fused = two_blocks(), plain = two_blocks();
  const std::vector<NodePlan> plan = plan_fusion(fused->fusion_wiring(FusionPath::Gpu));
  fused->use_plan_for_testing(plan);
  plain->use_plan_for_testing(unfused_plan(plain->nodes().size()));
  Recorder rec;
  fused->set_observer(&rec);
  const StepContext ctx{true, 0, 0};
  const Tensor x = filled({3, 16}, 0.125f), dy = filled({3, 16}, -0.0625f);
  std::vector<int> ready;
  const Tensor yf = fused->forward(ctx, x).clone();
  fused->backward(ctx, dy, [&](int node) {
    ready.push_back(node);
    rec.seen.push_back(fmt::format("ready{}", node));
  });
  const Tensor yp = plain->forward(ctx, x).clone();
  plain->backward(ctx, dy);

  ASSERT_EQ(yf.numel(), yp.numel());
  EXPECT_EQ(std::memcmp(yf.raw(), yp.raw(), yf.nbytes()), 0) << "output";
  EXPECT_EQ(std::memcmp(fused->grads().flat().raw(), plain->grads().flat().raw(), fused->grads().flat().nbytes()), 0)
      << "parameter gradients";
  // Nonzero, so the comparison means something: every layer's gradient took part.
  for (int s = 0; s < fused->grads().size(); ++s)
    EXPECT_NE(fused->grads().tensor(s).data<float>()[0], 0.0f) << fused->grads().slot(s).name;

  // Hosts run where the plan says: n3 at a4's position, n6 at a9's (after n8).
  const std::vector<std::string> want = {
      "f0", "/f0", "f1", "/f1", "f3", "/f3", "f7", "/f7", "f8", "/f8", "f6", "/f6", "f11", "/f11",
      "b11", "/b11", "ready11", "b6", "/b6", "ready6", "b8", "/b8", "ready8", "b7", "/b7", "ready7",
      "b3", "/b3", "ready3", "b1", "/b1", "ready1", "b0", "/b0", "ready0"};
  EXPECT_EQ(rec.seen, want);
  EXPECT_EQ(ready.size(), 7u);  // once per layer with parameters (s0 n1 n3 n6 s7 n8 s11)
  const std::vector<int> folded = {-1, -1, 1, -1, 3, 3, -1, -1, -1, 6, 6, -1};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(fused->folded_into(i), folded[i]) << fused->nodes()[i].layer->name();
  EXPECT_EQ(fused->nodes()[3].layer->epilogue(), Epilogue::AddRelu);
  EXPECT_EQ(fused->nodes()[1].layer->epilogue(), Epilogue::Relu);
  EXPECT_EQ(fused->nodes()[8].layer->epilogue(), Epilogue::None);

  // A second step reuses the plan and its shared outputs: the same numbers again.
  fused->zero_grad();
  plain->zero_grad();
  const Tensor yf2 = fused->forward(ctx, x).clone();
  fused->backward(ctx, dy);
  plain->forward(ctx, x);
  plain->backward(ctx, dy);
  EXPECT_EQ(std::memcmp(yf2.raw(), yp.raw(), yf2.nbytes()), 0);
  EXPECT_EQ(std::memcmp(fused->grads().flat().raw(), plain->grads().flat().raw(), fused->grads().flat().nbytes()), 0);
}

TEST(GraphFusion, AHostTakesTheResidualAsItsLastInput) {
  auto g = two_blocks();
  g->use_plan_for_testing(plan_fusion(g->fusion_wiring(FusionPath::Gpu)));
  EXPECT_EQ(g->nodes()[3].layer->run_inputs(), 2);
  EXPECT_EQ(g->nodes()[6].layer->run_inputs(), 2);
  EXPECT_EQ(g->nodes()[1].layer->run_inputs(), 1);
  // Re-planning hands every layer the new plan's epilogue.
  g->use_plan_for_testing(unfused_plan(g->nodes().size()));
  for (const auto& n : g->nodes()) EXPECT_EQ(n.layer->epilogue(), Epilogue::None) << n.layer->name();
}

}  // namespace
}  // namespace dp
