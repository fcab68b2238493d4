// Graph: parameters are views into one arena (same layout for gradients), state names follow
// registration order, backward sums gradients over consumers (residual joins) and fires the
// "gradients ready" hook in reverse layer order, once per layer with parameters. The graph tests
// run on both CPU backends (train.cpu_backend): oneDNN (channels-last activations, folded ReLUs)
// and the reference kernels; a residual CNN gives the same numbers on both.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/isa.h"
#include "models/build.h"
#include "runtime/cpu_gemm_choice.h"
#include "runtime/graph.h"
#include "runtime/graph_observer.h"
#include "tests/models/layer_harness.h"

namespace dp {
namespace {

// fc1 -> fc2 -> add(fc2, fc1) -> fc3: fc1's output has two consumers.
std::unique_ptr<Graph> residual_net(CpuBackend backend = CpuBackend::OneDnn) {
  ModelConfig mc;
  mc.layers = {test::layer_spec("linear", "fc1", {{"out_features", int64_t{6}}}),
               test::layer_spec("linear", "fc2", {{"out_features", int64_t{6}}}),
               test::layer_spec("add", "join", {}, {"fc2", "fc1"}),
               test::layer_spec("linear", "fc3", {{"out_features", int64_t{3}}})};
  auto g = models::build_model(mc, {4}, /*seed=*/11);
  g->set_cpu_backend(backend);
  return g;
}

class GraphOn : public ::testing::TestWithParam<CpuBackend> {};

Tensor random(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::zeros(s);
  Rng rng(seed, 0);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
  return t;
}

TEST(Graph, ParametersAreViewsIntoOneArena) {
  auto g = residual_net();
  EXPECT_EQ(g->num_parameters(), (4 * 6 + 6) + (6 * 6 + 6) + (6 * 3 + 3));
  const char* base = static_cast<const char*>(g->params().flat().raw());
  const char* gbase = static_cast<const char*>(g->grads().flat().raw());
  int64_t expect_offset = 0;
  for (int i = 0; i < g->params().size(); ++i) {
    const auto& slot = g->params().slot(i);
    EXPECT_EQ(slot.offset, expect_offset) << slot.name;  // packed back to back, in order
    EXPECT_EQ(static_cast<const char*>(g->params().tensor(i).raw()), base + 4 * slot.offset);
    EXPECT_EQ(static_cast<const char*>(g->grads().tensor(i).raw()), gbase + 4 * slot.offset);
    expect_offset += slot.numel;
  }
  std::vector<std::string> names;
  for (const auto& nt : g->state()) names.push_back(nt.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight",
                                             "fc3.bias"}));
  // The layer's own views are the arena's.
  EXPECT_EQ(g->nodes()[0].layer->params()[0].raw(), g->params().tensor(0).raw());
}

TEST_P(GraphOn, BackwardMatchesFiniteDifferencesThroughAResidualJoin) {
  auto g = residual_net(GetParam());
  const StepContext ctx{true, 0, 0};
  const Tensor x = random({5, 4}, 1), r = random({5, 3}, 2);
  auto loss = [&] {
    const Tensor& y = g->forward(ctx, x);
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data<float>()[i]) * r.data<float>()[i];
    return s;
  };
  g->zero_grad();
  loss();
  std::vector<int> ready;
  g->backward(ctx, r, [&](int node) { ready.push_back(node); });
  EXPECT_EQ(ready, (std::vector<int>{3, 1, 0})) << "reverse order, layers with parameters only";
  const Tensor analytic = g->grads().flat().clone();
  float* p = g->params().flat().data<float>();
  const double h = 1e-2;  // f32 parameters: a large step; the net is linear in each parameter
  double worst = 0;
  for (int64_t i = 0; i < analytic.numel(); ++i) {
    const float keep = p[i];
    p[i] = static_cast<float>(keep + h);
    const double lp = loss();
    p[i] = static_cast<float>(keep - h);
    const double lm = loss();
    p[i] = keep;
    const double num = (lp - lm) / (2 * h), ana = analytic.data<float>()[i];
    worst = std::max(worst, std::abs(num - ana) / std::max({std::abs(num), std::abs(ana), 1.0}));
  }
  EXPECT_LT(worst, 1e-4);
}

TEST_P(GraphOn, GradientsAccumulateUntilZeroed) {
  auto g = residual_net(GetParam());
  const StepContext ctx{true, 0, 0};
  const Tensor x = random({3, 4}, 3), r = random({3, 3}, 4);
  g->zero_grad();
  g->forward(ctx, x);
  g->backward(ctx, r);
  const Tensor once = g->grads().flat().clone();
  g->forward(ctx, x);
  g->backward(ctx, r);
  for (int64_t i = 0; i < once.numel(); ++i)
    ASSERT_FLOAT_EQ(g->grads().flat().data<float>()[i], 2 * once.data<float>()[i]) << i;
  g->zero_grad();
  for (int64_t i = 0; i < once.numel(); ++i) ASSERT_EQ(g->grads().flat().data<float>()[i], 0.0f);
}

TEST_P(GraphOn, BatchSizeMayChangeBetweenCalls) {
  auto g = residual_net(GetParam());
  const StepContext ctx{false, 0, 0};
  const Tensor x = random({4, 4}, 5);
  const Tensor full = g->forward(ctx, x).clone();
  const Tensor& half = g->forward(ctx, x.narrow0(0, 2));
  ASSERT_EQ(half.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < half.numel(); ++i) EXPECT_EQ(half.data<float>()[i], full.data<float>()[i]);
}

TEST_P(GraphOn, WrongInputShapeIsAClearError) {
  auto g = residual_net(GetParam());
  try {
    g->forward(StepContext{}, Tensor::zeros({2, 5}));
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "model input has shape [2, 5], expected [2, 4] (batch, then the model's input shape)");
  }
}

TEST(Graph, SameSeedSameInitDifferentSeedDifferent) {
  auto a = residual_net(), b = residual_net();
  ModelConfig mc;
  mc.preset = PresetKind::Mlp;
  mc.hidden = {8};
  auto c1 = models::build_model(mc, {1, 4, 4}, 1), c2 = models::build_model(mc, {1, 4, 4}, 2);
  EXPECT_EQ(0, std::memcmp(a->params().flat().raw(), b->params().flat().raw(), a->params().flat().nbytes()));
  EXPECT_NE(0, std::memcmp(c1->params().flat().raw(), c2->params().flat().raw(), c1->params().flat().nbytes()));
}

// conv-bn-relu, a residual join with a ReLU after it, pooling, flatten, linear-relu, linear: every
// fusion and the channels-last layout of the oneDNN plan.
std::unique_ptr<Graph> residual_cnn(CpuBackend backend) {
  ModelConfig mc;
  auto I = [](int64_t v) { return ArgValue{v}; };
  mc.layers = {test::layer_spec("conv2d", "conv1", {{"out_channels", I(8)}, {"kernel", I(3)}, {"padding", I(1)}}),
               test::layer_spec("batchnorm2d", "bn1", {}),
               test::layer_spec("relu", "relu1", {}),
               test::layer_spec("conv2d", "conv2", {{"out_channels", I(8)}, {"kernel", I(3)}, {"padding", I(1)}}),
               test::layer_spec("add", "join", {}, {"conv2", "relu1"}),
               test::layer_spec("relu", "relu2", {}),
               test::layer_spec("maxpool2d", "pool", {{"kernel", I(2)}}),
               test::layer_spec("flatten", "flat", {}),
               test::layer_spec("linear", "fc1", {{"out_features", I(16)}}),
               test::layer_spec("relu", "relu3", {}),
               test::layer_spec("linear", "fc2", {{"out_features", I(5)}})};
  auto g = models::build_model(mc, {3, 8, 8}, /*seed=*/5);
  g->set_cpu_backend(backend);
  return g;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num = std::max(num, static_cast<double>(std::abs(a.data<float>()[i] - b.data<float>()[i])));
    den = std::max(den, static_cast<double>(std::abs(b.data<float>()[i])));
  }
  return num / den;
}

TEST(Graph, OnednnPlanMatchesTheReferenceGraph) {
  using ::testing::HasSubstr;
  auto dnn = residual_cnn(CpuBackend::OneDnn), ref = residual_cnn(CpuBackend::Reference);
  // What auto picks depends on the ISA oneDNN runs (ONEDNN_MAX_CPU_ISA in CI's AVX2 pass): the line says.
  const bool avx512 = kernels::cpu::onednn_has_avx512_core();
  EXPECT_EQ(dnn->cpu_plan_summary(),
            "CPU kernels: oneDNN for [conv1 bn1 conv2 pool fc1 fc2], own for [join flat]; ReLUs fused: [bn1+relu1 "
            "join+relu2 fc1+relu3]; activations channels last (NHWC); convolutions: " +
                std::string(avx512 ? "Winograd where it fits, else direct (auto)"
                                   : "direct (auto: oneDNN's Winograd needs AVX-512)") +
                "; linear GEMMs: " +
                (process_mkl().loaded && process_mkl().own_kernels
                     ? cpu_gemm_words(CpuGemm::Mkl) + " (auto: MKL is present, on an Intel CPU)"
                 : avx512             ? "oneDNN matmul (auto)"
                                      : "OpenBLAS (auto: oneDNN's f32 matmul without AVX-512 allocates per call)") +
                "; ISA: oneDNN " + kernels::cpu::onednn_isa_name() + ", own loops " +
                kernels::cpu::clone_isa_name(kernels::cpu::clone_isa()));
  EXPECT_EQ(ref->cpu_plan_summary(), "CPU kernels: reference (im2col + BLAS, NCHW, unfused)");
  dnn->set_cpu_conv_algorithm(CpuConvAlgorithm::Direct);
  dnn->set_cpu_gemm(CpuGemm::Openblas);
  EXPECT_THAT(dnn->cpu_plan_summary(), HasSubstr("; convolutions: direct; linear GEMMs: OpenBLAS; ISA: oneDNN "));
  dnn->set_cpu_gemm(CpuGemm::Onednn);
  EXPECT_THAT(dnn->cpu_plan_summary(), HasSubstr("; linear GEMMs: oneDNN matmul; ISA: oneDNN "));
  if (process_mkl().loaded) {
    dnn->set_cpu_gemm(CpuGemm::Mkl);
    EXPECT_THAT(dnn->cpu_plan_summary(), HasSubstr("; linear GEMMs: MKL sgemm (oneMKL 20"));
  }
  dnn->set_cpu_gemm(CpuGemm::Auto);
  dnn->set_cpu_conv_algorithm(CpuConvAlgorithm::Auto);
  const StepContext ctx{true, 0, 0};
  const Tensor x = random({4, 3, 8, 8}, 6), r = random({4, 5}, 7);
  for (auto* g : {dnn.get(), ref.get()}) {
    g->zero_grad();
    g->forward(ctx, x);
    g->backward(ctx, r);
  }
  EXPECT_LT(max_rel_diff(dnn->forward(StepContext{false, 0, 0}, x), ref->forward(StepContext{false, 0, 0}, x).clone()),
            1e-5);
  EXPECT_LT(max_rel_diff(dnn->grads().flat(), ref->grads().flat()), 1e-5);
  for (size_t b = 0; b < ref->buffers().size(); ++b) {
    if (ref->buffers()[b].tensor.dtype() == DType::F32) {
      EXPECT_LT(max_rel_diff(dnn->buffers()[b].tensor, ref->buffers()[b].tensor), 1e-5) << ref->buffers()[b].name;
    }
  }
}

// Activations and their gradients live in buffers sized once per shape: after the first step,
// a step makes no tensor allocation (Storage::allocations() counts every one).
TEST_P(GraphOn, NoTensorAllocationAfterTheFirstStep) {
  auto g = residual_cnn(GetParam());
  const StepContext ctx{true, 0, 0};
  const Tensor x = random({4, 3, 8, 8}, 6), r = random({4, 5}, 7);
  auto step = [&] {
    g->zero_grad();
    g->forward(ctx, x);
    g->backward(ctx, r);
  };
  step();
  const int64_t before = Storage::allocations();
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(Storage::allocations() - before, 0);
  // The counter counts: a new tensor is one allocation.
  Tensor t = Tensor::zeros({3});
  EXPECT_EQ(Storage::allocations() - before, 1);
}

// The observer (profile.layers) hears of every node run, forward in order and backward in
// reverse, each begin followed by its end before the "gradients ready" hook; a ReLU folded into
// its producer (oneDNN's plan) is not run and not heard of, and folded_into names the producer.
struct Recorder final : GraphObserver {
  std::vector<std::string>* seen;
  explicit Recorder(std::vector<std::string>* s) : seen(s) {}
  void node_begin(int node, bool backward) override {
    seen->push_back(fmt::format("{}{}", backward ? "b" : "f", node));
  }
  void node_end(int node, bool backward) override {
    seen->push_back(fmt::format("/{}{}", backward ? "b" : "f", node));
  }
};

TEST_P(GraphOn, TheObserverHearsOfEveryNodeThatRuns) {
  auto g = residual_cnn(GetParam());
  std::vector<std::string> seen;
  Recorder rec(&seen);
  g->set_observer(&rec);
  const StepContext ctx{true, 0, 0};
  g->forward(ctx, random({2, 3, 8, 8}, 6));
  g->backward(ctx, random({2, 5}, 7), [&](int node) { seen.push_back(fmt::format("ready{}", node)); });
  const bool fused = GetParam() == CpuBackend::OneDnn;
  // Nodes: conv1 bn1 relu1 conv2 join relu2 pool flat fc1 relu3 fc2; relu1, relu2, relu3 fold.
  const std::vector<int> folded_into = fused ? std::vector<int>{-1, -1, 1, -1, -1, 4, -1, -1, -1, 8, -1}
                                             : std::vector<int>(11, -1);
  std::vector<std::string> want;
  for (int i = 0; i < 11; ++i)
    if (folded_into[i] < 0) want.insert(want.end(), {fmt::format("f{}", i), fmt::format("/f{}", i)});
  for (int i = 10; i >= 0; --i) {
    if (folded_into[i] >= 0) continue;
    want.insert(want.end(), {fmt::format("b{}", i), fmt::format("/b{}", i)});
    if (!g->nodes()[i].param_slots.empty()) want.push_back(fmt::format("ready{}", i));
  }
  EXPECT_EQ(seen, want);
  for (int i = 0; i < 11; ++i) EXPECT_EQ(g->folded_into(i), folded_into[i]) << g->nodes()[i].layer->name();
  g->set_observer(nullptr);
  seen.clear();
  g->forward(ctx, random({2, 3, 8, 8}, 6));
  EXPECT_TRUE(seen.empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, GraphOn, ::testing::Values(CpuBackend::OneDnn, CpuBackend::Reference),
                         [](const auto& info) { return std::string(enum_name(info.param)); });

}  // namespace
}  // namespace dp
