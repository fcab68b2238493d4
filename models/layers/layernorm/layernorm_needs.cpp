// defines: LayerNorm::backward_needs — layer norm's backward recomputes each row's mean and rstd
// from its input (every path), so it keeps its input only; on CUDA a scratch for the rows'
// statistics and the parameter sums' partials (layernorm_backward_scratch_floats, layernorm_kernels.cu:
// 2 floats a row plus 2 C floats per chunk of 64 rows; the same formula here, which is host code).
#include "models/layers/layernorm/layernorm.h"

namespace dp::models {

BackwardNeeds LayerNorm::backward_needs(const NeedsQuery& q) const {
  BackwardNeeds n{.input = true};
  if (q.path == MemoryPath::Cuda) {
    const int64_t rows = shape_numel(q.out) / C_;
    n.scratch_bytes = static_cast<size_t>(2 * rows + 2 * C_ * ((rows + 63) / 64)) * sizeof(float);
  }
  return n;
}

}  // namespace dp::models
