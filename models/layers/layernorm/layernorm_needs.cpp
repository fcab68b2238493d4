// defines: LayerNorm::backward_needs — layer norm's backward reads its input (every path); on
// oneDNN it also keeps the forward's rows' mean and variance (2 floats a row), elsewhere it
// recomputes them; on CUDA a scratch for the rows'
// statistics and the parameter sums' partials (layernorm_backward_scratch_floats, layernorm_kernels.cu:
// 2 floats a row plus 2 C floats per chunk of 64 rows; the same formula here, which is host code).
#include "models/layers/layernorm/layernorm.h"

namespace dp::models {

BackwardNeeds LayerNorm::backward_needs(const NeedsQuery& q) const {
  BackwardNeeds n{.input = true};
  const int64_t rows = shape_numel(q.out) / C_;
  if (q.path == MemoryPath::CpuOnednn) n.kept_bytes = static_cast<size_t>(2 * rows) * sizeof(float);  // mean, variance
  if (q.path == MemoryPath::Cuda) {
    n.scratch_bytes = static_cast<size_t>(2 * rows + 2 * C_ * ((rows + 63) / 64)) * sizeof(float);
  }
  return n;
}

}  // namespace dp::models
