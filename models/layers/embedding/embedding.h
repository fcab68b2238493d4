// defines: Embedding, layer type "embedding": the rows of a table picked by integer ids
// (PyTorch's nn.Embedding; GPT's token embedding transformer.wte), and its registration.
#pragma once
#include "models/layers/embedding/table_layer.h"
#include "runtime/layer_registry.h"

namespace dp::models {

class Embedding : public TableLayer {
 public:
  Embedding(std::string name, int64_t num_embeddings, int64_t embedding_dim, double init_std);
  const char* type() const override { return "embedding"; }
  bool takes_integer_input() const override { return true; }
  // Input: ids of any per-sample shape [S...] (i32) -> [S..., embedding_dim].
  // The table (TableLayer): (num_embeddings, embedding_dim).
  Shape setup(const std::vector<Shape>& in) override;

  // Backward reads the ids (its input), not its output.
  BackwardNeeds backward_needs(const NeedsQuery&) const override { return {.input = true}; }
 protected:
  // y[i, :] = weight[id[i], :]; backward: weight.grad[id[i], :] += dy[i, :] (in id order, so the
  // sums are the same on any thread count); ids get no gradient. An id outside
  // [0, num_embeddings) is a UserError naming the layer, the id and where it is.
  DP_LAYER_CPU_PATH();

  // GPU path (embedding_cuda.cpp): embedding_kernels.h on the compute stream; ids i32 on the
  // device, y and dy in ctx.compute, the table and its gradient f32 (under mixed precision a tied
  // LM head reads the 16-bit copy of the same slot). Ids are not checked on the device (that
  // would cost a host wait per step): the data path checks them against the vocabulary before
  // upload (the tokens dataset: "token N >= vocab_size"), and an id that still falls outside the
  // table gives a NaN row, so the step's loss is NaN and the non-finite check stops the run.
  DP_LAYER_CUDA_PATH();

 private:
  void check_ids(const Tensor& ids) const;
  Shape in_;
};

// num_embeddings (int, required, >= 1), embedding_dim (int, required, >= 1), init_std (float, 1.0).
void register_embedding(LayerRegistry& r);

}  // namespace dp::models
