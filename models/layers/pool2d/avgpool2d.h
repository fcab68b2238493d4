// defines: AvgPool2d, layer type "avgpool2d": 2-D average pooling (PyTorch's F.avg_pool2d, count_include_pad=True, floor mode), and its registration.
#pragma once
#include "models/layers/pool2d/pool2d_common.h"

namespace dp::models {

class AvgPool2d : public Pool2dLayer {
 public:
  using Pool2dLayer::Pool2dLayer;
  const char* type() const override { return "avgpool2d"; }
  PoolKind kind() const override { return PoolKind::Average; }
};

// kernel (int, required, >= 1), stride (int, 0 = kernel), padding (int, 0, at most kernel/2).
void register_avgpool2d(LayerRegistry& r);

}  // namespace dp::models
