// defines: BatchNorm2d::backward_needs — what batch norm's backward reads of its forward.
//   reference: its input only (the statistics are recomputed from it, batchnorm2d.cpp);
//   oneDNN (not SyncBN): its input and the batch mean and variance (2 C f32), and with a folded
//     ReLU oneDNN's ReLU workspace as oneDNN sizes it for the graph's layout (a byte or a bit an element; the
//     output itself is not read), in that order (batchnorm2d_onednn.cpp bind_kept);
//   CUDA (cuDNN, own, cudnn_ex): its input and the saved mean and 1/std (2 C f32); with a folded
//     ReLU or add+ReLU also its output (g = dy * (y > 0), batchnorm_relu_mask), and under a plain
//     ReLU a scratch of the output's size for g (under add+ReLU, g is written into the residual's
//     gradient). SyncBN keeps its statistics in f64 (2 C).
#include "models/layers/batchnorm2d/batchnorm2d.h"

namespace dp::models {

BackwardNeeds BatchNorm2d::backward_needs(const NeedsQuery& q) const {
  BackwardNeeds n{.input = true};
  const size_t stats = 2 * static_cast<size_t>(C_) * (sync_ ? sizeof(double) : sizeof(float));
  const bool relu = q.epilogue == Epilogue::Relu || q.epilogue == Epilogue::AddRelu;
  if (q.path == MemoryPath::CpuOnednn && !sync_) {
    n.kept_bytes = stats;
    if (relu) n.kept_bytes += onednn_relu_workspace_bytes(q.out.at(0), q.channels_last);
  } else if (q.path == MemoryPath::Cuda) {
    n.kept_bytes = stats;
    n.output = relu;
    if (q.epilogue == Epilogue::Relu) n.scratch_bytes = bytes_of(q.out, q.dtype);
  } else if (sync_) {
    n.kept_bytes = stats;
  }
  return n;
}

}  // namespace dp::models
