#include "models/build.h"

#include <algorithm>

#include "models/layers/batchnorm2d/batchnorm2d.h"
#include "models/layers/linear/linear.h"
#include "models/presets.h"
#include "models/registry.h"

namespace dp::models {

void validate_model(const ModelConfig& cfg) {
  ModelConfig c = cfg;
  if (c.num_classes == 0) c.num_classes = 2;  // "the data's count", known once the data is open: any valid count
  const std::vector<LayerSpec> specs = c.preset == PresetKind::None ? c.layers : preset_layers(c);
  std::vector<std::string> seen = {"input"};
  for (const auto& spec : specs) {
    layer_registry().validate(spec);
    for (const auto& in : spec.inputs)
      if (std::find(seen.begin(), seen.end(), in) == seen.end())
        DP_THROW_USER("{}: layer '{}' takes input '{}', which is not an earlier layer (layers must be listed after "
                      "their inputs; 'input' is the model input)",
                      spec.pos.str(), spec.name, in);
    if (std::find(seen.begin(), seen.end(), spec.name) != seen.end())
      DP_THROW_USER("{}: layer name '{}' is used twice", spec.pos.str(), spec.name);
    seen.push_back(spec.name);
  }
}

namespace {

// The cfg's layers, unbuilt, with the choices of a run on a GPU (`gpu`) or the CPU made.
std::unique_ptr<Graph> layers_of(const ModelConfig& cfg, bool gpu) {
  const std::vector<LayerSpec> specs = cfg.preset == PresetKind::None ? cfg.layers : preset_layers(cfg);
  const LayerRegistry& reg = layer_registry();
  auto g = std::make_unique<Graph>();
  for (const auto& spec : specs) {
    auto layer = reg.create(spec);
    if (auto* linear = dynamic_cast<Linear*>(layer.get())) linear->resolve_auto_padding(gpu);
    try {
      g->add(std::move(layer), spec.inputs);
    } catch (const UserError& e) {
      throw UserError(fmt::format("{}: {}", spec.pos.str(), e.what()));
    }
  }
  return g;
}

// A padded linear's consumers are the loss and the hit counts (output_width): it must be the last layer.
void check_padded_rows_last(const Graph& g) {
  const auto& nodes = g.nodes();
  for (size_t i = 0; i + 1 < nodes.size(); ++i)
    if (const auto* linear = dynamic_cast<const Linear*>(nodes[i].layer.get()); linear && linear->padded())
      DP_THROW_USER("layer '{}' (linear): pad_out_to pads its output rows ({} columns for {} outputs), which only the "
                    "model's last layer may do (the loss and the accuracy skip the padding), and layer '{}' follows "
                    "it; set pad_out_to = 1",
                    linear->name(), linear->row_stride(), linear->out_features(), nodes[i + 1].layer->name());
}

}  // namespace

std::unique_ptr<Graph> build_model(const ModelConfig& cfg, const Shape& input_shape, uint64_t seed, Device device,
                                   DType compute, cuda::ExecContext* gpu, ArenaMemory grad_memory) {
  std::unique_ptr<Graph> g = layers_of(cfg, !device.is_cpu());
  g->build(input_shape, seed, device, compute, gpu, grad_memory);
  check_padded_rows_last(*g);
  if (cfg.sync_bn)
    for (const auto& node : g->nodes())
      if (auto* bn = dynamic_cast<BatchNorm2d*>(node.layer.get())) bn->set_sync(true);
  return g;
}

std::unique_ptr<Graph> build_model_for_planning(const ModelConfig& cfg, const Shape& input_shape, uint64_t seed,
                                                bool gpu) {
  std::unique_ptr<Graph> g = layers_of(cfg, gpu);
  g->build(input_shape, seed);
  check_padded_rows_last(*g);
  return g;
}

int64_t output_width(const Graph& g) {
  const auto* linear = dynamic_cast<const Linear*>(g.nodes().back().layer.get());
  return linear && linear->padded() ? linear->out_features() : g.output_shape().back();
}

std::string apply_gpu_choices(Graph& g, const TrainConfig& train) {
  for (const auto& node : g.nodes())
    if (auto* bn = dynamic_cast<BatchNorm2d*>(node.layer.get())) bn->set_gpu_impl(train.bn_impl);
  g.set_gpu_fusion(train.gpu_fusion);
  if (g.device().is_cpu()) return "";
  g.use_gpu_step_arena(train.gpu_step_arena);
  return fmt::format("batch norm: train.bn_impl = {}; {}; step arena: {} (train.gpu_step_arena)", enum_name(train.bn_impl),
                     g.gpu_plan_summary(), train.gpu_step_arena ? "on" : "off");
}

}  // namespace dp::models
