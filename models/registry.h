// defines: layer_registry(), every built-in layer type registered by name.
#pragma once
#include "runtime/layer_registry.h"

namespace dp::models {
const LayerRegistry& layer_registry();
}
