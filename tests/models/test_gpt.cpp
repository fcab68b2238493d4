// The gpt2 preset as a graph: nanoGPT's state names and shapes, the LM head tied to the token
// embedding (one arena slot, the gradient the sum of both uses, reported to the reducer once and
// complete), causality of the logits, integer model inputs and their errors.
#include <gtest/gtest.h>

#include <cstring>

#include "collectives/reducer/reducer.h"
#include "models/build.h"
#include "models/presets.h"
#include "models/registry.h"
#include "models/weights_import.h"
#include "runtime/fusion_plan.h"
#include "tests/models/layer_harness.h"
#include "tests/error_text.h"

namespace dp::test {
namespace {

ModelConfig gpt_config(int64_t L, int64_t H, int64_t C, int64_t T, int64_t V, bool bias = true) {
  ModelConfig m;
  m.preset = PresetKind::Gpt2;
  m.n_layer = L, m.n_head = H, m.n_embd = C, m.block_size = T, m.vocab_size = V, m.bias = bias;
  return m;
}

Tensor token_ids(int64_t N, int64_t T, int64_t V, uint64_t seed) {
  Rng rng(seed, 7);
  Tensor x = Tensor::zeros({N, T}, DType::I32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int32_t>()[i] = static_cast<int32_t>(rng.below(V));
  return x;
}

// A graph of `specs` built for [T] ids.
std::unique_ptr<Graph> build_specs(const std::vector<LayerSpec>& specs, int64_t T, uint64_t seed) {
  auto g = std::make_unique<Graph>();
  for (const auto& s : specs) g->add(models::layer_registry().create(s), s.inputs);
  g->build({T}, seed);
  return g;
}

Tensor state_tensor(const Graph& g, const std::string& name) {
  for (const auto& nt : g.state())
    if (nt.name == name) return nt.tensor;
  throw std::runtime_error("no tensor " + name);
}

TEST(GptPreset, NanoGptStateNamesShapesAndParameterCount) {
  const int64_t C = 8, T = 6, V = 11;
  auto g = models::build_model(gpt_config(1, 2, C, T, V), {T}, 1);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const auto& nt : g->state()) names.push_back(nt.name), shapes.push_back(nt.tensor.shape());
  const std::string h = "transformer.h.0.";
  EXPECT_EQ(names, (std::vector<std::string>{"transformer.wte.weight", "transformer.wpe.weight", h + "ln_1.weight",
                                             h + "ln_1.bias", h + "attn.c_attn.weight", h + "attn.c_attn.bias",
                                             h + "attn.c_proj.weight", h + "attn.c_proj.bias", h + "ln_2.weight",
                                             h + "ln_2.bias", h + "mlp.c_fc.weight", h + "mlp.c_fc.bias",
                                             h + "mlp.c_proj.weight", h + "mlp.c_proj.bias", "transformer.ln_f.weight",
                                             "transformer.ln_f.bias", "lm_head.weight"}));
  EXPECT_EQ(shapes, (std::vector<Shape>{{V, C}, {T, C}, {C}, {C}, {3 * C, C}, {3 * C}, {C, C}, {C}, {C}, {C},
                                        {4 * C, C}, {4 * C}, {C, 4 * C}, {C}, {C}, {C}, {V, C}}));
  EXPECT_EQ(g->state().back().alias_of, "transformer.wte.weight");
  EXPECT_EQ(g->num_parameters(), V * C + T * C + (12 * C * C + 13 * C) + 2 * C);  // wte counted once
  EXPECT_EQ(g->output_shape(), (Shape{T, V}));

  auto nb = models::build_model(gpt_config(2, 2, C, T, V, /*bias=*/false), {T}, 1);
  EXPECT_EQ(nb->num_parameters(), V * C + T * C + 2 * (12 * C * C + 2 * C) + C);
  for (const auto& nt : nb->state()) EXPECT_EQ(nt.name.find("bias"), std::string::npos) << nt.name;
}

TEST(GptPreset, InitialisationFollowsNanoGpt) {
  const int64_t L = 3, C = 64, T = 32, V = 256;
  auto g = models::build_model(gpt_config(L, 4, C, T, V), {T}, 5);
  auto sd = [&](const std::string& name) {
    const Tensor t = state_tensor(*g, name);
    double s = 0;
    for (int64_t i = 0; i < t.numel(); ++i) s += static_cast<double>(t.data<float>()[i]) * t.data<float>()[i];
    return std::sqrt(s / static_cast<double>(t.numel()));
  };
  EXPECT_NEAR(sd("transformer.wte.weight"), 0.02, 0.001);
  EXPECT_NEAR(sd("transformer.h.1.attn.c_attn.weight"), 0.02, 0.001);
  EXPECT_NEAR(sd("transformer.h.1.mlp.c_fc.weight"), 0.02, 0.001);
  EXPECT_NEAR(sd("transformer.h.1.attn.c_proj.weight"), 0.02 / std::sqrt(2.0 * L), 0.001);
  EXPECT_NEAR(sd("transformer.h.1.mlp.c_proj.weight"), 0.02 / std::sqrt(2.0 * L), 0.001);
  EXPECT_EQ(sd("transformer.h.1.attn.c_attn.bias"), 0.0);
  EXPECT_EQ(sd("transformer.ln_f.weight"), 1.0);
}

TEST(GptPreset, TiedHeadIsOneArenaSlotSharedByBothLayers) {
  auto g = models::build_model(gpt_config(1, 2, 8, 6, 11), {6}, 1);
  for (const auto& s : g->params().slots()) EXPECT_NE(s.name, "lm_head.weight");
  const Graph::Node& head = g->nodes().back();
  const Graph::Node& wte = g->nodes().front();
  EXPECT_EQ(head.layer->name(), "lm_head");
  EXPECT_TRUE(head.param_slots.empty());
  ASSERT_EQ(head.tied_slots.size(), 1u);
  EXPECT_EQ(head.tied_slots[0], wte.param_slots[0]);
  EXPECT_EQ(head.layer->params()[0].raw(), wte.layer->params()[0].raw());
  EXPECT_EQ(head.layer->grads()[0].raw(), wte.layer->grads()[0].raw());
  EXPECT_NE(g->summary().find("(+ tied transformer.wte.weight)"), std::string::npos) << g->summary();
}

// Forward, then backward of sum(logits * r) for a fixed r.
void forward_backward(Graph& g, const Tensor& x, uint64_t seed) {
  const StepContext ctx{true, 1, 0};
  g.zero_grad();
  const Tensor& y = g.forward(ctx, x);
  Rng rng(seed, 3);
  Tensor dy = random_normal(y.shape(), DType::F32, rng);
  g.backward(ctx, dy);
}

TEST(GptPreset, TiedGradientIsTheSumOfBothUses) {
  const int64_t T = 6, V = 11;
  const ModelConfig mc = gpt_config(1, 2, 8, T, V);
  std::vector<LayerSpec> specs = models::preset_layers(mc);
  auto tied = build_specs(specs, T, 4);
  specs.back().args["tie_weight"] = std::string();  // the same model with a head of its own
  auto untied = build_specs(specs, T, 4);
  const auto tied_state = tied->state();
  for (const auto& nt : untied->state()) {
    if (nt.name == "lm_head.weight") nt.tensor.copy_from(state_tensor(*tied, "transformer.wte.weight"));
    else nt.tensor.copy_from(state_tensor(*tied, nt.name));
  }
  const Tensor x = token_ids(3, T, V, 9);
  forward_backward(*tied, x, 2);
  forward_backward(*untied, x, 2);
  auto grad_of = [](Graph& g, const std::string& name) {
    for (const auto& n : g.nodes())
      for (size_t k = 0; k < n.param_slots.size(); ++k)
        if (g.params().slot(n.param_slots[k]).name == name) return g.grads().tensor(n.param_slots[k]);
    throw std::runtime_error("no parameter " + name);
  };
  const Tensor emb = cast(grad_of(*untied, "transformer.wte.weight"), DType::F64);
  const Tensor head = cast(grad_of(*untied, "lm_head.weight"), DType::F64);
  Tensor sum = emb.clone();
  for (int64_t i = 0; i < sum.numel(); ++i) set(sum, i, get(emb, i) + get(head, i));
  EXPECT_LT(normalised_error(cast(grad_of(*tied, "transformer.wte.weight"), DType::F64), sum), 1e-6);
  EXPECT_GT(normalised_error(emb, sum), 1e-2) << "the head's share is not negligible";
  EXPECT_GT(normalised_error(head, sum), 1e-2) << "the embedding's share is not negligible";
}

// The reducer hears of the tied slot once, from its owner (the embedding, last in backward), and
// by then the gradient is complete: nothing is added after the report.
TEST(GptPreset, ReducerSeesTheTiedParameterOnceAndComplete) {
  const int64_t T = 6, V = 11;
  auto g = models::build_model(gpt_config(2, 2, 8, T, V), {T}, 1);
  SingleProcessCommunicator comm;
  ReducerOptions o;
  o.first_bucket_bytes = 64, o.bucket_bytes = 256;
  Reducer r(comm, *g, o);
  const int wte_slot = g->nodes().front().param_slots[0];
  const Tensor wte_grad = g->grads().tensor(wte_slot);
  int reports = 0;
  Tensor at_report;
  r.prepare();
  const StepContext ctx{true, 1, 0};
  g->zero_grad();
  const Tensor& y = g->forward(ctx, token_ids(2, T, V, 3));
  Rng rng(5, 0);
  g->backward(ctx, random_normal(y.shape(), DType::F32, rng), [&](int node) {
    for (int s : g->nodes()[node].param_slots)
      if (s == wte_slot) ++reports, at_report = wte_grad.clone();
    r.on_ready(node);
  });
  EXPECT_NO_THROW(r.finalize());
  EXPECT_EQ(reports, 1);
  ASSERT_TRUE(at_report.defined());
  EXPECT_EQ(std::memcmp(at_report.raw(), wte_grad.raw(), wte_grad.nbytes()), 0);
  double mag = 0;
  for (int64_t i = 0; i < wte_grad.numel(); ++i) mag = std::max(mag, std::abs(static_cast<double>(wte_grad.data<float>()[i])));
  EXPECT_GT(mag, 0.0);
}

// Position t's logits depend on tokens 0..t only; and both CPU backends agree.
// train.gpu_fusion on a GPT: the GPU plan folds each block's tanh GELU into the c_fc linear
// before it (cuBLASLt's GELU epilogue) and nothing else; an erf GELU (nanoGPT's nn.GELU()) would
// not fold, and the plan on the wiring is all a GPU graph adds.
TEST(GptGraph, GpuPlanFoldsEachMlpGeluIntoItsCfc) {
  auto g = models::build_model(gpt_config(3, 2, 8, 6, 11), {6}, 1);
  const std::vector<NodePlan> plan = plan_fusion(g->fusion_wiring(FusionPath::Gpu));
  std::vector<std::string> folds;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].folded_into < 0) continue;
    const int h = plan[i].folded_into;
    EXPECT_EQ(plan[h].epilogue, Epilogue::Gelu);
    EXPECT_EQ(plan[h].runs_at, h);
    folds.push_back(g->nodes()[h].layer->name() + "+" + g->nodes()[i].layer->name() + ":" +
                    g->nodes()[h].layer->type() + "+" + g->nodes()[i].layer->type());
  }
  ASSERT_EQ(folds.size(), 3u);
  for (int b = 0; b < 3; ++b) EXPECT_NE(folds[b].find("h." + std::to_string(b) + ".mlp.c_fc+"), std::string::npos) << folds[b];
  for (const auto& f : folds) EXPECT_NE(f.find(":linear+gelu"), std::string::npos) << f;
}

TEST(GptGraph, LogitsAreCausalAndBackendsAgree) {
  const int64_t T = 70, V = 13;  // more positions than one causal block of the oneDNN path
  auto g = models::build_model(gpt_config(2, 2, 16, T, V), {T}, 2);
  Tensor x = token_ids(2, T, V, 4);
  const StepContext ctx{false, 0, 0};
  const Tensor a = g->forward(ctx, x).clone();
  x.data<int32_t>()[40] = (x.data<int32_t>()[40] + 1) % V;  // sample 0, position 40
  const Tensor b = g->forward(ctx, x).clone();
  EXPECT_EQ(a.shape(), (Shape{2, T, V}));
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), 40 * V * sizeof(float)), 0) << "positions before 40 changed";
  EXPECT_NE(std::memcmp(a.data<float>() + 40 * V, b.data<float>() + 40 * V, V * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.data<float>() + T * V, b.data<float>() + T * V, T * V * sizeof(float)), 0)
      << "sample 1 changed";
  g->set_cpu_backend(CpuBackend::Reference);
  EXPECT_LT(normalised_error(cast(g->forward(ctx, x), DType::F64), cast(b, DType::F64)), 1e-5);
}

using testutil::error_of;

TEST(GptGraph, IdsIntoALayerThatCannotTakeThemIsAnError) {
  auto g = build_specs({layer_spec("linear", "fc1", {{"out_features", ArgValue{int64_t{3}}}})}, 4, 1);
  EXPECT_EQ(error_of([&] { g->forward(StepContext{}, token_ids(2, 4, 5, 1)); }),
            "layer 'fc1' (linear) takes the model input, which is i32 ids (e.g. token ids); only a layer that takes "
            "ids (embedding) can: begin the model with an 'embedding' layer, or feed float samples");
}

TEST(GptGraph, BadIdsAndFloatsIntoAnEmbeddingAreErrors) {
  auto g = models::build_model(gpt_config(1, 2, 8, 4, 11), {4}, 1);
  Tensor x = token_ids(2, 4, 11, 1);
  x.data<int32_t>()[6] = 11;
  EXPECT_EQ(error_of([&] { g->forward(StepContext{}, x); }),
            "layer 'transformer.wte' (embedding), forward: id 11 at sample 1, position 2 is outside [0, 11) "
            "(num_embeddings; "
            "for a GPT model model.vocab_size): the data holds ids the model has no row for");
  const std::string f = error_of([&] { g->forward(StepContext{}, Tensor::zeros({2, 4})); });
  EXPECT_NE(f.find("layer 'transformer.wte' (embedding): input is f32[2, 4] on cpu, but an embedding takes integer "
                   "ids (i32)"),
            std::string::npos)
      << f;
}

TEST(GptGraph, SetupErrorsNameTheLayerAndTheKey) {
  EXPECT_EQ(error_of([] { models::build_model(gpt_config(1, 2, 8, 4, 11), {5}, 1); }),
            "layer 'transformer.wpe' (position_embedding): the input has 5 positions, more than num_positions = 4 "
            "(for a GPT model: the samples are longer than model.block_size)");
  EXPECT_EQ(error_of([] { models::build_model(gpt_config(1, 3, 8, 4, 11), {4}, 1); }),
            "layer 'transformer.h.0.attn' (causal_self_attention): the input has C = 8 features, which n_head = 3 "
            "does not divide (for a GPT model: model.n_embd must be a multiple of model.n_head)");
  std::vector<LayerSpec> specs = models::preset_layers(gpt_config(1, 2, 8, 4, 11));
  specs.back().args["tie_weight"] = std::string("transformer.wte.wieght");
  const std::string e = error_of([&] { build_specs(specs, 4, 1); });
  EXPECT_NE(e.find("parameter 'lm_head.weight' is tied to 'transformer.wte.wieght', which is not a parameter of an "
                   "earlier layer (earlier parameters: transformer.wte.weight, transformer.wpe.weight, "),
            std::string::npos)
      << e;
}

// Hugging Face GPT-2 checkpoints (GPT2Model without "transformer.", Conv1D weights (in, out),
// mask buffers) read as nanoGPT's names and layouts; a nanoGPT state_dict only loses its buffers.
TEST(GptWeights, HuggingFaceNamesAndConv1dLayoutsTranslate) {
  const int64_t C = 8;
  const std::vector<TensorSig> hf = {{"wte.weight", DType::F32, {11, C}},
                                     {"h.0.attn.bias", DType::F32, {1, 1, 4, 4}},
                                     {"h.0.attn.masked_bias", DType::F32, {}},
                                     {"h.0.attn.c_attn.weight", DType::F32, {C, 3 * C}},
                                     {"h.0.attn.c_attn.bias", DType::F32, {3 * C}},
                                     {"h.0.attn.c_proj.weight", DType::F32, {C, C}},
                                     {"h.0.mlp.c_fc.weight", DType::F32, {C, 4 * C}},
                                     {"h.0.mlp.c_proj.weight", DType::F32, {4 * C, C}},
                                     {"ln_f.weight", DType::F32, {C}}};
  const WeightsTranslation t = models::gpt2_translation(hf);
  EXPECT_EQ(t.kind, "Hugging Face GPT-2 (Conv1D weights transposed), its attention-mask buffers ignored");
  EXPECT_EQ(t.ignore, (std::set<std::string>{"h.0.attn.bias", "h.0.attn.masked_bias"}));
  EXPECT_EQ(t.transpose, (std::set<std::string>{"h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight",
                                                "h.0.mlp.c_fc.weight", "h.0.mlp.c_proj.weight"}));
  EXPECT_EQ(t.rename.at("ln_f.weight"), "transformer.ln_f.weight");
  EXPECT_EQ(t.rename.at("h.0.attn.c_attn.bias"), "transformer.h.0.attn.c_attn.bias");
  const std::vector<TensorSig> nano = {{"transformer.wte.weight", DType::F32, {11, C}},
                                       {"transformer.h.0.attn.bias", DType::F32, {1, 1, 4, 4}},
                                       {"transformer.h.0.attn.c_attn.weight", DType::F32, {3 * C, C}},
                                       {"lm_head.weight", DType::F32, {11, C}}};
  const WeightsTranslation n = models::gpt2_translation(nano);
  EXPECT_EQ(n.kind, "GPT state_dict, its attention-mask buffers ignored");
  EXPECT_TRUE(n.rename.empty());
  EXPECT_TRUE(n.transpose.empty());
  EXPECT_EQ(n.ignore, (std::set<std::string>{"transformer.h.0.attn.bias"}));
  EXPECT_EQ(models::gpt2_translation({{"fc.weight", DType::F32, {2, 2}}}).kind, "");  // not a GPT: as it is
}

}  // namespace
}  // namespace dp::test
