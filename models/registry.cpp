#include "models/registry.h"

namespace dp::models {

const LayerRegistry& layer_registry() {
  static const LayerRegistry reg = [] {
    LayerRegistry r;
    return r;
  }();
  return reg;
}

}  // namespace dp::models
