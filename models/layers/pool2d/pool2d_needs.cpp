// defines: Pool2dLayer::backward_needs — what max and average pooling's backward read.
//   max, reference: its input (the argmax is found again, pool2d_common.cpp);
//   max, oneDNN: the argmax workspace of the forward (counted as 4 bytes an output element, an
//     upper bound of oneDNN's u8/s32 workspace) and its input (the workspace is keyed on it, and
//     recomputed from it for another input, onednn_pool.cpp);
//   average, reference and oneDNN: nothing (dy spread over each window);
//   CUDA, both: its input and its output (cudnnPoolingBackward takes y and x).
#include "models/layers/pool2d/pool2d_common.h"

namespace dp::models {

BackwardNeeds Pool2dLayer::backward_needs(const NeedsQuery& q) const {
  if (q.path == MemoryPath::Cuda) return {.input = true, .output = true};
  if (kind() != PoolKind::Max) return {};
  BackwardNeeds n{.input = true};
  if (q.path == MemoryPath::CpuOnednn) n.kept_bytes = static_cast<size_t>(shape_numel(q.out)) * 4;
  return n;
}

}  // namespace dp::models
