// defines: layer_registry(), every built-in layer type registered by name.
#pragma once
#include "runtime/layer_registry.h"

namespace dp::models {
const LayerRegistry& layer_registry();

// A layer type a test binary adds for the models of its own tests (e.g. a minimal token model
// while the real ones are elsewhere), before anything builds a model; dptrain never calls it.
void add_layer_type_for_tests(const std::string& type, std::vector<ArgSpec> args, LayerFactory factory);
}
