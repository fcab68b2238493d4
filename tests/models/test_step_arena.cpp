// The step arena (runtime/graph_step_arena.cpp; issue 30): the memory plan is what the CPU runs,
// and with train.gpu_step_arena what a GPU runs. Proofs, on both CPU backends:
//   - poisoned: the arena filled with NaN before every forward, and each of its tensors right
//     after the last step event the plan lets read it, changes no bit of the trained weights of
//     the Fashion-MNIST CNN (batch norm, dropout), the CIFAR ResNet-18 (residual adds) and a small
//     GPT, a smaller last batch included: no layer reads bytes before they are written, or after
//     the plan gave them to another tensor (those would be NaN, or another tensor's values); the
//     same with the GPU's arena of only the outputs and input gradients, placed on the CPU;
//   - planned = measured: the account's activation bytes grow by exactly the activations that
//     plan_step_memory(...) plans (Storage charges the bytes asked; its 64-byte rounding is not
//     charged), no input-gradient bytes besides and none of the layers' own (what they keep and
//     their scratch is in the arena), and a smaller batch reallocates nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "models/build.h"
#include "runtime/enum_names.h"
#include "runtime/fusion_plan.h"
#include "runtime/memory_account.h"
#include "runtime/optim/optimizer.h"
#include "runtime/step_memory.h"
#include "tests/gpu_test.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>

#include "tests/models/cuda_layer_harness.h"
#endif

namespace dp {
namespace {

struct Model {
  ModelConfig mc;
  Shape sample;
  int64_t batch;
};

Model cnn() {
  Model m{{}, {1, 28, 28}, 8};
  m.mc.preset = PresetKind::Cnn;
  m.mc.dropout = 0.25;
  return m;
}

Model resnet() {
  Model m{{}, {3, 32, 32}, 2};
  m.mc.preset = PresetKind::CifarResnet18;
  return m;
}

Model gpt() {
  Model m{{}, {32}, 3};
  m.mc.preset = PresetKind::Gpt2;
  m.mc.n_layer = 2, m.mc.n_head = 4, m.mc.n_embd = 64, m.mc.block_size = 32, m.mc.vocab_size = 96;
  m.mc.dropout = 0.1;
  return m;
}

Tensor input(const Model& m, int64_t batch, uint64_t step) {
  Shape s{batch};
  s.insert(s.end(), m.sample.begin(), m.sample.end());
  const bool ids = m.mc.preset == PresetKind::Gpt2;
  Tensor x = Tensor::zeros(s, ids ? DType::I32 : DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t v = (i * 7919 + static_cast<int64_t>(step) * 104729) % 251;
    if (ids) x.data<int32_t>()[i] = static_cast<int32_t>(v % m.mc.vocab_size);
    else x.data<float>()[i] = static_cast<float>(v) / 251.0f - 0.5f;
  }
  return x;
}

// `steps` AdamW steps at m.batch, then one at a smaller batch (a last partial batch); the loss
// gradient reads the logits (0.01 * logits, minus 1 at a fixed class per row), so the forward's
// output matters too. Returns the parameters.
// graph_only: the arena holds only the outputs and input gradients, as a GPU's does.
std::vector<float> train(const Model& m, CpuBackend backend, bool poison, int steps, bool graph_only = false) {
  auto g = models::build_model(m.mc, m.sample, /*seed=*/5);
  g->set_cpu_backend(backend);
  g->poison_step_arena_for_testing(poison);
  g->place_graph_tensors_only_for_testing(graph_only);
  auto opt = optim::make_adamw(g->num_parameters(), {});
  for (int s = 0; s <= steps; ++s) {
    const int64_t batch = s < steps ? m.batch : m.batch - 1;
    const StepContext ctx{true, static_cast<uint64_t>(s), 0};
    g->zero_grad();
    const Tensor& y = g->forward(ctx, input(m, batch, static_cast<uint64_t>(s)));
    Tensor dy = Tensor::zeros(y.shape());
    const int64_t classes = y.shape().back();
    for (int64_t i = 0; i < y.numel(); ++i)
      dy.data<float>()[i] = 0.01f * y.data<float>()[i] - (i % classes == 3 ? 1.0f : 0.0f);
    g->backward(ctx, dy);
    opt->step(g->params().flat(), g->grads().flat(), 1e-3);
  }
  EXPECT_GT(g->step_arena_bytes(), 0u);
  const Tensor p = g->params().flat();
  return std::vector<float>(p.data<float>(), p.data<float>() + p.numel());
}

class StepArena : public ::testing::TestWithParam<CpuBackend> {};

void expect_poison_changes_nothing(const Model& m, CpuBackend backend, bool graph_only = false) {
  const std::vector<float> clean = train(m, backend, false, 3), poisoned = train(m, backend, true, 3, graph_only);
  ASSERT_EQ(clean.size(), poisoned.size());
  size_t differ = 0;
  for (size_t i = 0; i < clean.size(); ++i) differ += std::memcmp(&clean[i], &poisoned[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << differ << " of " << clean.size() << " parameters differ after a poisoned arena";
}

TEST_P(StepArena, PoisonedArenaTrainsTheCnnToTheSameBits) { expect_poison_changes_nothing(cnn(), GetParam()); }
TEST_P(StepArena, PoisonedArenaTrainsTheResnetToTheSameBits) { expect_poison_changes_nothing(resnet(), GetParam()); }
TEST_P(StepArena, PoisonedArenaTrainsTheGptToTheSameBits) { expect_poison_changes_nothing(gpt(), GetParam()); }
// The GPU's arena (outputs and input gradients only, StepMemoryQuery::graph_tensors_only) placed,
// poisoned, on the CPU: its plan and placement give the same bits too (the layers keep their state).
TEST_P(StepArena, PoisonedGraphTensorsOnlyArenaTrainsTheCnnToTheSameBits) {
  expect_poison_changes_nothing(cnn(), GetParam(), true);
}
TEST_P(StepArena, PoisonedGraphTensorsOnlyArenaTrainsTheResnetToTheSameBits) {
  expect_poison_changes_nothing(resnet(), GetParam(), true);
}
TEST_P(StepArena, PoisonedGraphTensorsOnlyArenaTrainsTheGptToTheSameBits) {
  expect_poison_changes_nothing(gpt(), GetParam(), true);
}

// The account's activation bytes grow by the planned arena and nothing else of the graph's or its
// layers'.
void expect_measured_is_planned(const Model& m, CpuBackend backend) {
  auto g = models::build_model(m.mc, m.sample, /*seed=*/5);
  g->set_cpu_backend(backend);
  const MemoryBreakdown before = memory_breakdown();
  const StepContext ctx{true, 0, 0};
  const Tensor& y = g->forward(ctx, input(m, m.batch, 0));
  g->backward(ctx, Tensor::zeros(y.shape()));
  const MemoryBreakdown after = memory_breakdown();
  const MemoryPath path = backend == CpuBackend::OneDnn ? MemoryPath::CpuOnednn : MemoryPath::CpuReference;
  StepMemoryQuery q{.batch = m.batch, .activations = DType::F32, .path = path, .alignment = 256};
  q.fusion = device_fusion_plan(*g, path, DType::F32, false, false);
  const size_t planned = plan_step_memory(*g, q).packing.arena_bytes;
  const auto cat = [](MemoryCategory c) { return static_cast<size_t>(c); };
  EXPECT_EQ(after.live[cat(MemoryCategory::Activations)] - before.live[cat(MemoryCategory::Activations)], planned);
  EXPECT_EQ(after.live[cat(MemoryCategory::InputGradients)], before.live[cat(MemoryCategory::InputGradients)]);
  EXPECT_EQ(after.live[cat(MemoryCategory::LayerState)], before.live[cat(MemoryCategory::LayerState)]);
  EXPECT_EQ(g->step_arena_bytes(), planned);
  // Tensors whose lifetimes do not overlap share bytes: the arena is below the sum of the graph's.
  const StepMemoryPlan plan = plan_step_memory(*g, q);
  size_t sum = 0;
  for (const PlanTensor& t : plan.tensors) sum += t.bytes;
  EXPECT_LT(planned, sum);

  // A smaller batch is placed in the same bytes.
  const int64_t smaller = m.batch > 3 ? m.batch - 3 : 1;
  q.batch = smaller;
  EXPECT_LE(plan_step_memory(*g, q).packing.arena_bytes, planned);
  const Tensor& y2 = g->forward(ctx, input(m, smaller, 1));
  g->backward(ctx, Tensor::zeros(y2.shape()));
  EXPECT_EQ(memory_breakdown().live[cat(MemoryCategory::Activations)], after.live[cat(MemoryCategory::Activations)]);
  EXPECT_EQ(memory_breakdown().live[cat(MemoryCategory::LayerState)], before.live[cat(MemoryCategory::LayerState)]);
  EXPECT_EQ(g->step_arena_bytes(), planned);
}

TEST_P(StepArena, MeasuredActivationBytesAreThePlannedArenaCnn) { expect_measured_is_planned(cnn(), GetParam()); }
TEST_P(StepArena, MeasuredActivationBytesAreThePlannedArenaResnet) { expect_measured_is_planned(resnet(), GetParam()); }
TEST_P(StepArena, MeasuredActivationBytesAreThePlannedArenaGpt) { expect_measured_is_planned(gpt(), GetParam()); }

// A plan whose layout is not the one cpu_channels_last would pick (use_plan_for_testing keeps NCHW
// while every layer of the CNN takes NHWC): the arena is planned for the layout the graph runs, so
// batch norm's fused-ReLU workspace and max pooling's indices fit what oneDNN asks for in NCHW (a
// byte an element for batch norm, not NHWC's bit: a kept span too small would stop the layer).
TEST(StepArenaLayout, AnNchwPlanSizesTheWorkspacesForNchw) {
  const Model m = cnn();
  auto g = models::build_model(m.mc, m.sample, /*seed=*/5);
  g->set_cpu_backend(CpuBackend::OneDnn);
  std::vector<NodePlan> plan = plan_fusion(g->fusion_wiring(FusionPath::CpuOnednn));
  ASSERT_TRUE(std::any_of(plan.begin(), plan.end(), [](const NodePlan& p) { return p.epilogue == Epilogue::Relu; }));
  g->use_plan_for_testing(plan);
  const MemoryBreakdown before = memory_breakdown();
  const StepContext ctx{true, 0, 0};
  const Tensor& y = g->forward(ctx, input(m, m.batch, 0));
  g->backward(ctx, Tensor::zeros(y.shape()));
  StepMemoryQuery q{.batch = m.batch, .activations = DType::F32, .path = MemoryPath::CpuOnednn, .fusion = plan,
                    .alignment = 256, .channels_last = false};
  EXPECT_EQ(g->step_arena_bytes(), plan_step_memory(*g, q).packing.arena_bytes);
  q.channels_last = true;  // what the default plan would keep: less (a bit an element for batch norm's workspace)
  EXPECT_LT(plan_step_memory(*g, q).packing.arena_bytes, g->step_arena_bytes());
  const auto cat = static_cast<size_t>(MemoryCategory::LayerState);
  EXPECT_EQ(memory_breakdown().live[cat], before.live[cat]);
}

INSTANTIATE_TEST_SUITE_P(Backends, StepArena, ::testing::Values(CpuBackend::OneDnn, CpuBackend::Reference),
                         [](const auto& info) { return std::string(enum_name(info.param)); });

#ifdef DPTRAIN_HAVE_CUDA
// The GPU's step arena (DPTRAIN_GPU_STEP_ARENA, Graph::use_gpu_step_arena): the outputs and input
// gradients placed by the plan's lifetimes, poisoned as on the CPU (0xFF into the whole arena
// before each forward and into each tensor right after its last planned reader, on the compute
// stream), against the same graph with one allocation per output: the same bits in every output
// and parameter gradient of two steps (the model's batch, then one less; within the GPU's own
// run-to-run differences where it has any), with the GPU's fusions
// (batch norm + ReLU / add + ReLU, linear + GELU) and channels-last 16-bit activations. A CUDA
// layer reading bytes its backward_needs does not declare would read NaN or another tensor here.
struct GpuArenaCase {
  const char* name;
  Model (*model)();
  DType compute;
};

std::vector<std::vector<double>> gpu_steps(const Model& m, DType compute, bool arena) {
  cuda::ExecContext exec(0, size_t{64} << 20);
  auto g = models::build_model(m.mc, m.sample, /*seed=*/5, Device::cuda(0), compute, &exec);
  g->set_gpu_fusion(true);
  g->use_gpu_step_arena(arena);
  g->poison_step_arena_for_testing(arena);
  StepContext ctx{true, 5, 0};
  ctx.gpu = &exec, ctx.compute = compute, ctx.channels_last = compute != DType::F32;
  std::vector<std::vector<double>> out;
  const auto values = [](const Tensor& host) { return std::vector<double>(host.data<double>(), host.data<double>() + host.numel()); };
  for (int s = 0; s < 2; ++s) {
    const int64_t batch = s == 0 ? m.batch : m.batch - 1;
    ctx.step = static_cast<uint64_t>(s);
    g->zero_grad();
    const Tensor x = test::gpu::upload(input(m, batch, static_cast<uint64_t>(s)), compute, ctx.channels_last,
                                       Device::cuda(0));
    const Tensor y = test::gpu::download(g->forward(ctx, x), false);
    Tensor dy = Tensor::zeros(y.shape());
    const int64_t classes = y.shape().back();
    for (int64_t i = 0; i < y.numel(); ++i)
      dy.data<float>()[i] = 0.01f * static_cast<float>(y.data<double>()[i]) - (i % classes == 3 ? 1.0f : 0.0f);
    g->backward(ctx, test::gpu::upload(dy, DType::F32, false, Device::cuda(0)));
    out.push_back(values(y));
    for (int t = 0; t < g->grads().size(); ++t) out.push_back(values(test::gpu::download(g->grads().tensor(t), false)));
  }
  EXPECT_EQ(g->step_arena_bytes() > 0, arena);
  return out;
}

class StepArenaGpu : public gputest::GpuTestWithParam<GpuArenaCase> {};

// Values that differ between two runs (bitwise), and the largest difference.
struct Difference {
  size_t values = 0, differ = 0, non_finite = 0;  // non_finite: in b only
  double worst = 0;
};
Difference compare(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  Difference d;
  EXPECT_EQ(a.size(), b.size());
  for (size_t t = 0; t < std::min(a.size(), b.size()); ++t) {
    EXPECT_EQ(a[t].size(), b[t].size()) << "tensor " << t;
    for (size_t i = 0; i < std::min(a[t].size(), b[t].size()); ++i, ++d.values) {
      d.non_finite += !std::isfinite(b[t][i]) && std::isfinite(a[t][i]);
      if (std::memcmp(&a[t][i], &b[t][i], sizeof(double)) == 0) continue;
      ++d.differ;
      d.worst = std::max(d.worst, std::fabs(a[t][i] - b[t][i]));
    }
  }
  return d;
}

// Bit for bit when the GPU repeats itself (two runs without the arena agree); where a kernel is
// not deterministic (a cuDNN algorithm summing with atomics), within 10x the differences of those
// two runs, never a NaN the clean runs do not have.
DP_GPU_TEST_P(StepArenaGpu, PoisonedArenaGivesTheBitsOfSeparateOutputs) {
  const GpuArenaCase c = GetParam();
  const Model m = c.model();
  const auto separate = gpu_steps(m, c.compute, false), again = gpu_steps(m, c.compute, false),
             placed = gpu_steps(m, c.compute, true);
  const Difference repeat = compare(separate, again), d = compare(separate, placed);
  RecordProperty("repeat_differ", std::to_string(repeat.differ));
  EXPECT_EQ(d.non_finite, 0u) << "values NaN or infinite only with the poisoned arena: a layer reads bytes the plan "
                                 "gave to another tensor";
  if (repeat.differ == 0) {
    EXPECT_EQ(d.differ, 0u) << d.differ << " of " << d.values << " values differ (largest difference " << d.worst
                            << "): a layer reads bytes the plan gave to another tensor";
  } else {
    EXPECT_LE(d.worst, 10 * repeat.worst) << "the GPU is not deterministic here (" << repeat.differ
                                          << " values differ between two runs without the arena, by up to "
                                          << repeat.worst << "), and the arena's run differs by more";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, StepArenaGpu,
                         ::testing::Values(GpuArenaCase{"cnn_f32", cnn, DType::F32},
                                           GpuArenaCase{"cnn_bf16", cnn, DType::BF16},
                                           GpuArenaCase{"resnet_f32", resnet, DType::F32},
                                           GpuArenaCase{"resnet_bf16", resnet, DType::BF16},
                                           GpuArenaCase{"gpt_f32", gpt, DType::F32},
                                           GpuArenaCase{"gpt_bf16", gpt, DType::BF16}),
                         [](const auto& info) { return std::string(info.param.name); });
#endif  // DPTRAIN_HAVE_CUDA

}  // namespace
}  // namespace dp
