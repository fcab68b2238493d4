// defines: TableLayer, what the token embedding (embedding.h) and the position embedding
// (models/layers/position_embedding/position_embedding.h) share: one learned f32 table "weight"
// (num_ rows, dim_ columns) drawn N(0, init_std^2), read by rows, with no 4-D activations. The
// gradient of such a table is one kernel too (table_grad.cuh).
#pragma once
#include "runtime/layer_registry.h"

namespace dp::models {

class TableLayer : public Layer {
 public:
  // "weight" (num_, dim_): N(0, init_std^2) (PyTorch's nn.Embedding default: std 1; GPT: 0.02).
  std::vector<ParamDecl> declare_params() const override;
  bool cpu_channels_last() const override { return true; }  // no 4-D activations: no layout

 protected:
  // dim 0: the subclass learns it in setup (the position embedding's C is its input's width).
  TableLayer(std::string name, int64_t num_rows, int64_t dim, double init_std)
      : Layer(std::move(name)), num_(num_rows), dim_(dim), init_std_(init_std) {}

  int64_t num_, dim_;
  double init_std_;
};

}  // namespace dp::models
