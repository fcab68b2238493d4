// defines: Pool2dLayer::backward_needs — what max and average pooling's backward read.
//   max, reference: its input (the argmax is found again, pool2d_common.cpp);
//   max, oneDNN: the argmax workspace of the forward (as oneDNN sizes it for these shapes and
//     the graph's layout: u8 or s32 indices) and its input
//     (the workspace is keyed on it, and recomputed from it for another input, onednn_pool.cpp);
//   average, reference and oneDNN: nothing (dy spread over each window);
//   CUDA, both: its input and its output (cudnnPoolingBackward takes y and x).
#include "models/layers/pool2d/pool2d_common.h"

namespace dp::models {

BackwardNeeds Pool2dLayer::backward_needs(const NeedsQuery& q) const {
  if (q.path == MemoryPath::Cuda) return {.input = true, .output = true};
  if (kind() != PoolKind::Max) return {};
  BackwardNeeds n{.input = true};
  if (q.path == MemoryPath::CpuOnednn) {
    const kernels::cpu::onednn::PoolGeometry g{q.out.at(0), d_.C,  d_.H,   d_.W,  d_.K,           d_.K,
                                               d_.stride,   d_.pad, d_.OH, d_.OW, q.channels_last, true};
    n.kept_bytes = kernels::cpu::onednn::pool_workspace_bytes(g);
  }
  return n;
}

}  // namespace dp::models
