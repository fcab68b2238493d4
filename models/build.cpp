#include "models/build.h"

#include "models/presets.h"
#include "models/registry.h"

namespace dp::models {

std::unique_ptr<Graph> build_model(const ModelConfig& cfg, const Shape& input_shape, uint64_t seed, Device device) {
  const std::vector<LayerSpec> specs = cfg.preset.empty() ? cfg.layers : preset_layers(cfg);
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
  g->build(input_shape, seed, device);
  return g;
}

}  // namespace dp::models
