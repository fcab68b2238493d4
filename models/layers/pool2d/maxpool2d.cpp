#include "models/layers/pool2d/maxpool2d.h"

namespace dp::models {

void register_maxpool2d(LayerRegistry& r) {
  r.add("maxpool2d", pool2d_arg_specs(), [](const std::string& name, const LayerArgs& a) {
    return std::make_unique<MaxPool2d>(name, a.i("kernel"), a.i("stride"), a.i("padding"));
  });
}

}  // namespace dp::models
