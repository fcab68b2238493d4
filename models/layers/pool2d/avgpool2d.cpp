#include "models/layers/pool2d/avgpool2d.h"

namespace dp::models {

void register_avgpool2d(LayerRegistry& r) {
  r.add("avgpool2d", pool2d_arg_specs(), [](const std::string& name, const LayerArgs& a) {
    return std::make_unique<AvgPool2d>(name, a.i("kernel"), a.i("stride"), a.i("padding"));
  });
}

}  // namespace dp::models
