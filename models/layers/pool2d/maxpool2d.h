// defines: MaxPool2d, layer type "maxpool2d": 2-D max pooling (PyTorch's F.max_pool2d: -inf padding, floor mode), and its registration.
#pragma once
#include "models/layers/pool2d/pool2d_common.h"

namespace dp::models {

class MaxPool2d : public Pool2dLayer {
 public:
  using Pool2dLayer::Pool2dLayer;
  const char* type() const override { return "maxpool2d"; }
  PoolKind kind() const override { return PoolKind::Max; }
};

// kernel (int, required, >= 1), stride (int, 0 = kernel), padding (int, 0, at most kernel/2).
void register_maxpool2d(LayerRegistry& r);

}  // namespace dp::models
