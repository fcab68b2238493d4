// Issue 30: GPT's LM head with padded logits rows (models/layers/linear/linear.h pad_out_to). A
// small GPT with V = 65 classes in rows of 128 against the same model unpadded, on both CPU
// backends: the same logits in the first V columns and 0 after them, the same loss, every
// parameter gradient bitwise equal, a zero loss gradient in the padding, the same weights after a
// few AdamW steps, and byte-equal checkpoints (the parameters stay (V, C): nothing padded is saved).
// Also: where padding is on (the preset's "auto": a GPU run's layers, not the CPU's), the hit
// counts over padded rows, and the errors of a padded layer that is not last or has a bias.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <vector>

#include "kernels/cpu/label_rank.h"
#include "models/build.h"
#include "models/layers/linear/linear.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "models/presets.h"
#include "models/registry.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/optim/adamw.h"
#include "runtime/step_memory.h"
#include "tests/bytes.h"
#include "tests/models/layer_harness.h"
#include "tests/error_text.h"

namespace dp::test {
namespace {

constexpr int64_t kV = 65, kPadded = 128, kT = 8, kC = 16, kN = 3;

ModelConfig small_gpt() {
  ModelConfig m;
  m.preset = PresetKind::Gpt2;
  m.n_layer = 2, m.n_head = 2, m.n_embd = kC, m.block_size = kT, m.vocab_size = kV, m.bias = true;
  return m;
}

// A CPU path: the backend, and on oneDNN the linear layers' GEMM library (train.cpu_gemm).
struct CpuPath {
  CpuBackend backend;
  CpuGemm gemm;
};

// The preset's layers with the LM head's pad_out_to set, built for [T] ids on the CPU.
std::unique_ptr<Graph> gpt_padded_to(int64_t pad_out_to, CpuPath path) {
  std::vector<LayerSpec> specs = models::preset_layers(small_gpt());
  specs.back().args["pad_out_to"] = ArgValue{pad_out_to};
  auto g = std::make_unique<Graph>();
  for (const auto& s : specs) g->add(models::layer_registry().create(s), s.inputs);
  g->build({kT}, /*seed=*/5);
  g->set_cpu_backend(path.backend);
  g->set_cpu_gemm(path.gemm);
  return g;
}

Tensor token_ids(uint64_t seed) {
  Rng rng(seed, 7);
  Tensor x = Tensor::zeros({kN, kT}, DType::I32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int32_t>()[i] = static_cast<int32_t>(rng.below(kV));
  return x;
}

using testutil::error_of;

LayerSpec linear_spec(const std::string& name, std::map<std::string, ArgValue> args) {
  LayerSpec s;
  s.type = "linear";
  s.name = name;
  s.args = std::move(args);
  return s;
}


// One training step's forward, loss and backward; returns the loss, leaves dlogits in `dz`.
double loss_and_backward(Graph& g, const Tensor& x, const Tensor& y, Tensor& dz) {
  const StepContext ctx{true, 1, 0};
  g.zero_grad();
  const Tensor& logits = g.forward(ctx, x);
  const int64_t ld = logits.dim(-1);
  const Tensor z = logits.reshape({kN * kT, ld});
  dz = Tensor::zeros({kN * kT, ld});
  const double loss = models::SoftmaxCrossEntropy(0.1).forward_backward(z, y, &dz, models::output_width(g));
  g.backward(ctx, dz.reshape(logits.shape()));
  return loss;
}

class PaddedHead : public ::testing::TestWithParam<CpuPath> {};

TEST_P(PaddedHead, LogitsLossGradientsStepsAndCheckpointEqualTheUnpadded) {
  auto plain = gpt_padded_to(1, GetParam()), padded = gpt_padded_to(64, GetParam());
  ASSERT_EQ(plain->output_shape(), (Shape{kT, kV}));
  ASSERT_EQ(padded->output_shape(), (Shape{kT, kPadded}));
  EXPECT_EQ(models::output_width(*padded), kV);
  EXPECT_EQ(models::output_width(*plain), kV);
  ASSERT_EQ(test::tensor_bytes(padded->params().flat()), test::tensor_bytes(plain->params().flat()));  // same init

  const Tensor x = token_ids(9);
  Tensor y = token_ids(11).reshape({kN * kT});
  // The logits: the padded rows' first V columns bitwise the unpadded rows, the rest 0.
  const StepContext eval{false, 1, 0};
  const Tensor a = plain->forward(eval, x).clone(), b = padded->forward(eval, x).clone();
  for (int64_t r = 0; r < kN * kT; ++r) {
    const float* pa = a.data<float>() + r * kV;
    const float* pb = b.data<float>() + r * kPadded;
    ASSERT_EQ(std::memcmp(pa, pb, kV * sizeof(float)), 0) << "row " << r;
    for (int64_t k = kV; k < kPadded; ++k) ASSERT_EQ(pb[k], 0.0f) << "row " << r << " column " << k;
  }
  // The labels' ranks (the hit counts) skip the padding.
  std::vector<int32_t> ra(kN * kT), rb(kN * kT);
  kernels::cpu::label_ranks(a.data<float>(), y.data<int32_t>(), kN * kT, kV, 5, ra.data());
  kernels::cpu::label_ranks(b.data<float>(), y.data<int32_t>(), kN * kT, kV, 5, rb.data(), kPadded);
  EXPECT_EQ(ra, rb);

  optim::AdamWOptions o;
  optim::AdamW opt_a(plain->params().numel(), o), opt_b(padded->params().numel(), o);
  for (int step = 0; step < 3; ++step) {
    Tensor dza, dzb;
    const double la = loss_and_backward(*plain, x, y, dza), lb = loss_and_backward(*padded, x, y, dzb);
    EXPECT_EQ(la, lb) << "step " << step;
    for (int64_t r = 0; r < kN * kT; ++r)
      for (int64_t k = kV; k < kPadded; ++k) ASSERT_EQ(dzb.data<float>()[r * kPadded + k], 0.0f);
    // Every parameter's gradient, the tied wte/lm_head slot included, bitwise.
    for (int s = 0; s < static_cast<int>(plain->params().slots().size()); ++s)
      ASSERT_EQ(test::tensor_bytes(plain->grads().tensor(s)), test::tensor_bytes(padded->grads().tensor(s)))
          << plain->params().slot(s).name << " at step " << step;
    opt_a.step(plain->params().flat(), plain->grads().flat(), 1e-2);
    opt_b.step(padded->params().flat(), padded->grads().flat(), 1e-2);
  }
  EXPECT_EQ(test::tensor_bytes(padded->params().flat()), test::tensor_bytes(plain->params().flat()));

  // The checkpoints: byte-equal files (the padded model saves lm_head.weight as (V, C)). A folder of
  // this process's own: ctest runs the three paths side by side.
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("dp_padded_head_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  CheckpointMeta m;
  m.step = 3, m.seed = 5, m.batch_size = kN, m.dataset_size = 100, m.optimizer = "adamw", m.optimizer_steps = 3;
  write_checkpoint((dir / "plain.ckpt").string(), *plain, opt_a, m);
  write_checkpoint((dir / "padded.ckpt").string(), *padded, opt_b, m);
  auto read = [](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string fa = read(dir / "plain.ckpt"), fb = read(dir / "padded.ckpt");
  EXPECT_FALSE(fa.empty());
  EXPECT_TRUE(fa == fb) << "the padded model's checkpoint differs from the unpadded one's";
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(CpuPaths, PaddedHead,
                         ::testing::Values(CpuPath{CpuBackend::Reference, CpuGemm::Auto},
                                           CpuPath{CpuBackend::OneDnn, CpuGemm::Onednn},
                                           CpuPath{CpuBackend::OneDnn, CpuGemm::Openblas}),
                         [](const ::testing::TestParamInfo<CpuPath>& info) {
                           if (info.param.backend == CpuBackend::Reference) return std::string("Reference");
                           return std::string(info.param.gemm == CpuGemm::Onednn ? "OnednnMatmul" : "OnednnOpenblas");
                         });

// The preset's "auto": a GPU run's layers pad the head to a multiple of 64, the CPU's do not.
TEST(PaddedHeadChoice, AutoPadsForAGpuRunOnly) {
  EXPECT_EQ(models::build_model(small_gpt(), {kT}, 1)->output_shape(), (Shape{kT, kV}));
  auto gpu_plan = models::build_model_for_planning(small_gpt(), {kT}, 1, /*gpu=*/true);
  EXPECT_EQ(gpu_plan->output_shape(), (Shape{kT, kPadded}));
  EXPECT_EQ(models::output_width(*gpu_plan), kV);
  EXPECT_EQ(models::build_model_for_planning(small_gpt(), {kT}, 1, false)->output_shape(), (Shape{kT, kV}));
  // What `dptrain memory` plans for that GPU run: the logits and their f32 gradient in rows of Vp.
  StepMemoryQuery q{.batch = kN, .activations = DType::BF16, .path = MemoryPath::Cuda};
  q.fusion = unfused_plan(gpu_plan->nodes().size());
  const StepMemoryPlan plan = plan_step_memory(*gpu_plan, q);
  size_t dlogits = 0, head_out = 0;
  for (const PlanTensor& t : plan.tensors) {
    if (t.name == "loss.dlogits_f32") dlogits = t.bytes;
    if (t.name == "lm_head.out") head_out = t.bytes;
  }
  EXPECT_EQ(dlogits, static_cast<size_t>(kN * kT * kPadded * 4));
  EXPECT_EQ(head_out, static_cast<size_t>(kN * kT * kPadded * 2));
  EXPECT_EQ(models::padded_row_stride(50257, 64), 50304);
  EXPECT_EQ(models::padded_row_stride(64, 64), 64);
  EXPECT_EQ(models::padded_row_stride(65, 1), 65);
}

TEST(PaddedHeadChoice, APaddedLayerMustBeLastAndBiasFree) {
  ModelConfig m;
  m.layers = {linear_spec("fc1", {{"out_features", int64_t{5}}, {"bias", false}, {"pad_out_to", int64_t{8}}}),
              linear_spec("fc2", {{"out_features", int64_t{3}}})};
  EXPECT_EQ(error_of([&] { models::build_model(m, {4}, 1); }),
            "layer 'fc1' (linear): pad_out_to pads its output rows (8 columns for 5 outputs), which only the model's "
            "last layer may do (the loss and the accuracy skip the padding), and layer 'fc2' follows it; set "
            "pad_out_to = 1");
  m.layers = {linear_spec("fc", {{"out_features", int64_t{5}}, {"pad_out_to", int64_t{8}}})};
  EXPECT_NE(error_of([&] { models::build_model(m, {4}, 1); })
                .find("layer 'fc' (linear): pad_out_to = 8 pads the output rows of a layer without a bias only"),
            std::string::npos);
}

}  // namespace
}  // namespace dp::test
