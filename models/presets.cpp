#include "models/presets.h"

#include <cmath>

namespace dp::models {
namespace {

// Small builder for LayerSpec lists.
struct Seq {
  std::vector<LayerSpec> layers;
  std::string last = "input";

  std::string add(const std::string& type, const std::string& name, std::map<std::string, ArgValue> args = {},
                  std::vector<std::string> inputs = {}) {
    LayerSpec s;
    s.type = type;
    s.name = name;
    s.args = std::move(args);
    s.inputs = inputs.empty() ? std::vector<std::string>{last} : std::move(inputs);
    layers.push_back(std::move(s));
    last = name;
    return name;
  }
};

const ArgValue kNoBias = false;
const ArgValue kTvInit = std::string("kaiming_normal_fan_out");  // torchvision's ResNet conv init

std::string conv(Seq& s, const std::string& name, int64_t out, int64_t k, int64_t stride, int64_t pad,
                 const std::string& input = "") {
  std::vector<std::string> in;
  if (!input.empty()) in = {input};
  return s.add("conv2d", name,
               {{"out_channels", out}, {"kernel", k}, {"stride", stride}, {"padding", pad}, {"bias", kNoBias},
                {"init", kTvInit}},
               in);
}

// torchvision BasicBlock: conv3x3(stride) bn relu conv3x3 bn (+ downsample) add relu.
void basic_block(Seq& s, const std::string& p, int64_t planes, int64_t stride, bool downsample) {
  const std::string in = s.last;
  conv(s, p + ".conv1", planes, 3, stride, 1);
  s.add("batchnorm2d", p + ".bn1");
  s.add("relu", p + ".relu1");
  conv(s, p + ".conv2", planes, 3, 1, 1);
  std::string main = s.add("batchnorm2d", p + ".bn2");
  std::string skip = in;
  if (downsample) {
    conv(s, p + ".downsample.0", planes, 1, stride, 0, in);
    skip = s.add("batchnorm2d", p + ".downsample.1");
  }
  s.add("add", p + ".add", {}, {main, skip});
  s.add("relu", p + ".relu2");
}

// torchvision Bottleneck (v1.5): conv1x1 bn relu conv3x3(stride) bn relu conv1x1(4x) bn (+ds) add relu.
void bottleneck(Seq& s, const std::string& p, int64_t planes, int64_t stride, bool downsample) {
  const std::string in = s.last;
  conv(s, p + ".conv1", planes, 1, 1, 0);
  s.add("batchnorm2d", p + ".bn1");
  s.add("relu", p + ".relu1");
  conv(s, p + ".conv2", planes, 3, stride, 1);
  s.add("batchnorm2d", p + ".bn2");
  s.add("relu", p + ".relu2");
  conv(s, p + ".conv3", planes * 4, 1, 1, 0);
  std::string main = s.add("batchnorm2d", p + ".bn3");
  std::string skip = in;
  if (downsample) {
    conv(s, p + ".downsample.0", planes * 4, 1, stride, 0, in);
    skip = s.add("batchnorm2d", p + ".downsample.1");
  }
  s.add("add", p + ".add", {}, {main, skip});
  s.add("relu", p + ".relu3");
}

std::vector<LayerSpec> resnet(const ModelConfig& cfg, bool bottle, std::vector<int> blocks, bool cifar_stem) {
  Seq s;
  if (cifar_stem) {
    conv(s, "conv1", 64, 3, 1, 1);
  } else {
    conv(s, "conv1", 64, 7, 2, 3);
  }
  s.add("batchnorm2d", "bn1");
  s.add("relu", "relu");
  if (!cifar_stem) s.add("maxpool2d", "maxpool", {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"padding", int64_t{1}}});
  const int64_t expansion = bottle ? 4 : 1;
  int64_t in_planes = 64;
  for (int stage = 0; stage < 4; ++stage) {
    int64_t planes = int64_t{64} << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
      bool ds = b == 0 && (stride != 1 || in_planes != planes * expansion);
      std::string p = fmt::format("layer{}.{}", stage + 1, b);
      if (bottle) bottleneck(s, p, planes, stride, ds);
      else basic_block(s, p, planes, stride, ds);
      in_planes = planes * expansion;
    }
  }
  s.add("global_avgpool", "avgpool");
  s.add("flatten", "flatten");
  s.add("linear", "fc", {{"out_features", cfg.num_classes}});
  return s.layers;
}

std::vector<LayerSpec> mlp(const ModelConfig& cfg) {
  Seq s;
  s.add("flatten", "flatten");
  for (size_t i = 0; i < cfg.hidden.size(); ++i) {
    s.add("linear", fmt::format("fc{}", i + 1), {{"out_features", cfg.hidden[i]}});
    s.add("relu", fmt::format("relu{}", i + 1));
  }
  if (cfg.dropout > 0) s.add("dropout", "dropout", {{"p", cfg.dropout}});
  s.add("linear", fmt::format("fc{}", cfg.hidden.size() + 1), {{"out_features", cfg.num_classes}});
  return s.layers;
}

std::vector<LayerSpec> cnn(const ModelConfig& cfg) {
  Seq s;
  const int64_t widths[2] = {32, 64};
  for (int i = 0; i < 2; ++i) {
    s.add("conv2d", fmt::format("conv{}", i + 1),
          {{"out_channels", widths[i]}, {"kernel", int64_t{3}}, {"padding", int64_t{1}}, {"bias", kNoBias}});
    s.add("batchnorm2d", fmt::format("bn{}", i + 1));
    s.add("relu", fmt::format("relu{}", i + 1));
    s.add("maxpool2d", fmt::format("pool{}", i + 1), {{"kernel", int64_t{2}}});
  }
  s.add("flatten", "flatten");
  s.add("linear", "fc1", {{"out_features", int64_t{128}}});
  s.add("relu", "relu3");
  if (cfg.dropout > 0) s.add("dropout", "dropout", {{"p", cfg.dropout}});
  s.add("linear", "fc2", {{"out_features", cfg.num_classes}});
  return s.layers;
}

// nanoGPT's GPT (its names, so its state_dict loads as is): token and position embeddings,
// n_layer blocks x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)), ln_f, and lm_head tied to wte.
// nanoGPT's init: N(0, 0.02) weights and embeddings, zero biases, the residual projections
// (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 n_layer)). Dropouts only when model.dropout > 0.
std::vector<LayerSpec> gpt(const ModelConfig& cfg) {
  Seq s;
  const int64_t C = cfg.n_embd;
  const ArgValue bias = cfg.bias, p = cfg.dropout, init_std = 0.02;
  const ArgValue proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layer));
  s.add("embedding", "transformer.wte", {{"num_embeddings", cfg.vocab_size}, {"embedding_dim", C}, {"init_std", init_std}});
  s.add("position_embedding", "transformer.wpe", {{"num_positions", cfg.block_size}, {"init_std", init_std}});
  if (cfg.dropout > 0) s.add("dropout", "transformer.drop", {{"p", p}});
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    const std::string h = fmt::format("transformer.h.{}", i);
    const std::string in = s.last;
    s.add("layernorm", h + ".ln_1", {{"bias", bias}});
    s.add("causal_self_attention", h + ".attn",
          {{"n_head", cfg.n_head}, {"bias", bias}, {"dropout", p}, {"resid_dropout", p}, {"init_std", init_std},
           {"proj_init_std", proj_std}});
    const std::string mid = s.add("add", h + ".add_attn", {}, {s.last, in});
    s.add("layernorm", h + ".ln_2", {{"bias", bias}});
    s.add("linear", h + ".mlp.c_fc", {{"out_features", 4 * C}, {"bias", bias}, {"init_std", init_std}});
    s.add("gelu", h + ".mlp.gelu");
    s.add("linear", h + ".mlp.c_proj", {{"out_features", C}, {"bias", bias}, {"init_std", proj_std}});
    if (cfg.dropout > 0) s.add("dropout", h + ".mlp.dropout", {{"p", p}});
    s.add("add", h + ".add_mlp", {}, {s.last, mid});
  }
  s.add("layernorm", "transformer.ln_f", {{"bias", bias}});
  // pad_out_to 0 ("auto"): on a GPU the logits' rows are padded to a multiple of 64 (50,257 ->
  // 50,304: the GEMMs' leading dimension); on the CPU unpadded (models/layers/linear/linear.h).
  s.add("linear", "lm_head",
        {{"out_features", cfg.vocab_size}, {"bias", kNoBias}, {"tie_weight", std::string("transformer.wte.weight")},
         {"pad_out_to", int64_t{0}}});
  return s.layers;
}

}  // namespace

std::vector<LayerSpec> preset_layers(const ModelConfig& cfg) {
  switch (cfg.preset) {
    case PresetKind::None: break;
    case PresetKind::Mlp: return mlp(cfg);
    case PresetKind::Cnn: return cnn(cfg);
    case PresetKind::Resnet18: return resnet(cfg, false, {2, 2, 2, 2}, false);
    case PresetKind::Resnet50: return resnet(cfg, true, {3, 4, 6, 3}, false);
    case PresetKind::CifarResnet18: return resnet(cfg, false, {2, 2, 2, 2}, true);
    case PresetKind::Gpt2: return gpt(cfg);
  }
  DP_CHECK(false, "preset_layers without a preset (model.preset = \"\" means the [[layer]] list)");
  return {};
}

}  // namespace dp::models
