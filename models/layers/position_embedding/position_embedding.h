// defines: PositionEmbedding, layer type "position_embedding": a learned vector per position added
// to a sequence (GPT's transformer.wpe: x + wpe[arange(T)]), and its registration.
#pragma once
#include "models/layers/embedding/table_layer.h"
#include "runtime/layer_registry.h"

namespace dp::models {

class PositionEmbedding : public TableLayer {
 public:
  PositionEmbedding(std::string name, int64_t num_positions, double init_std);
  const char* type() const override { return "position_embedding"; }
  // Input [T, C] with T <= num_positions -> [T, C]. The table (TableLayer) is (num_positions, C),
  // C learned here; rows T.. are unused by a shorter sequence.
  Shape setup(const std::vector<Shape>& in) override;

  // Nothing kept: dx = dy, the table's gradient sums dy over the batch.
  BackwardNeeds backward_needs(const NeedsQuery&) const override { return {}; }
 protected:
  // y[n, t, :] = x[n, t, :] + weight[t, :]; backward: dx = dy, weight.grad[t, :] += sum_n dy[n, t, :]
  // (samples summed in order).
  DP_LAYER_CPU_PATH();

  // GPU path (position_embedding_cuda.cpp): position_embedding_kernels.h on the compute stream,
  // x and y in ctx.compute, the table f32.
  DP_LAYER_CUDA_PATH();

 private:
  int64_t T_ = 0;  // positions of the input; its width C is the table's dim_
};

// num_positions (int, required, >= 1), init_std (float, 1.0).
void register_position_embedding(LayerRegistry& r);

}  // namespace dp::models
