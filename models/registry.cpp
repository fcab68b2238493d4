#include "models/registry.h"

#include "models/layers/add/add.h"
#include "models/layers/attention/attention.h"
#include "models/layers/pool2d/avgpool2d.h"
#include "models/layers/batchnorm2d/batchnorm2d.h"
#include "models/layers/conv2d/conv2d.h"
#include "models/layers/dropout/dropout.h"
#include "models/layers/embedding/embedding.h"
#include "models/layers/flatten/flatten.h"
#include "models/layers/gelu/gelu.h"
#include "models/layers/global_avgpool/global_avgpool.h"
#include "models/layers/layernorm/layernorm.h"
#include "models/layers/linear/linear.h"
#include "models/layers/pool2d/maxpool2d.h"
#include "models/layers/position_embedding/position_embedding.h"
#include "models/layers/relu/relu.h"

namespace dp::models {

namespace {

LayerRegistry& registry() {
  static LayerRegistry reg = [] {
    LayerRegistry r;
    register_linear(r);
    register_conv2d(r);
    register_batchnorm2d(r);
    register_relu(r);
    register_maxpool2d(r);
    register_avgpool2d(r);
    register_global_avgpool(r);
    register_flatten(r);
    register_dropout(r);
    register_add(r);
    register_embedding(r);
    register_position_embedding(r);
    register_layernorm(r);
    register_gelu(r);
    register_causal_self_attention(r);
    return r;
  }();
  return reg;
}

}  // namespace

const LayerRegistry& layer_registry() { return registry(); }

void add_layer_type_for_tests(const std::string& type, std::vector<ArgSpec> args, LayerFactory factory) {
  registry().add(type, std::move(args), std::move(factory));
}

}  // namespace dp::models
