#include "models/layers/embedding/table_layer.h"

#include "models/layers/common.h"

namespace dp::models {

std::vector<ParamDecl> TableLayer::declare_params() const {
  return {{"weight", {num_, dim_}, true, DType::F32, init_normal(init_std_)}};
}

}  // namespace dp::models
