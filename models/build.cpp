#include "models/build.h"

#include <algorithm>

#include "models/layers/batchnorm2d/batchnorm2d.h"
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

std::unique_ptr<Graph> build_model(const ModelConfig& cfg, const Shape& input_shape, uint64_t seed, Device device,
                                   DType compute, cuda::ExecContext* gpu, ArenaMemory grad_memory) {
  const std::vector<LayerSpec> specs = cfg.preset == PresetKind::None ? cfg.layers : preset_layers(cfg);
  const LayerRegistry& reg = layer_registry();
  auto g = std::make_unique<Graph>();
  for (const auto& spec : specs) {
    auto layer = reg.create(spec);
    try {
      g->add(std::move(layer), spec.inputs);
    } catch (const UserError& e) {
      throw UserError(fmt::format("{}: {}", spec.pos.str(), e.what()));
    }
  }
  g->build(input_shape, seed, device, compute, gpu, grad_memory);
  if (cfg.sync_bn)
    for (const auto& node : g->nodes())
      if (auto* bn = dynamic_cast<BatchNorm2d*>(node.layer.get())) bn->set_sync(true);
  return g;
}

std::string apply_gpu_choices(Graph& g, const TrainConfig& train) {
  for (const auto& node : g.nodes())
    if (auto* bn = dynamic_cast<BatchNorm2d*>(node.layer.get())) bn->set_gpu_impl(train.bn_impl);
  g.set_gpu_fusion(train.gpu_fusion);
  if (g.device().is_cpu()) return "";
  return fmt::format("batch norm: train.bn_impl = {}; {}", enum_name(train.bn_impl), g.gpu_plan_summary());
}

}  // namespace dp::models
