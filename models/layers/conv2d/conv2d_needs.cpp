// defines: Conv2d::backward_needs — what the convolution's backward reads of its forward.
//   every path: its input (dW = dy * x; conv2d_ref.h, oneDNN's backward weights, cuDNN's filter
//     gradient);
//   a folded ReLU (CPU oneDNN, GPU graph or legacy): its output too, and a scratch of the
//     output's size where dy masked by y > 0 is written (OnednnState::Bwd::masked_dy,
//     CudaState::dy_masked);
//   CUDA channels last (16-bit data): a KRSC copy of the weight and a KRSC filter gradient
//     (filter_layout.h), weight-sized scratch.
// The cuDNN workspace is the plan's workspace category, not the layer's.
#include "models/layers/conv2d/conv2d.h"

namespace dp::models {

BackwardNeeds Conv2d::backward_needs(const NeedsQuery& q) const {
  BackwardNeeds n{.input = true};
  if (q.epilogue == Epilogue::Relu) {
    n.output = true;
    n.scratch_bytes += bytes_of(q.out, q.dtype);
  }
  if (q.path == MemoryPath::Cuda && q.dtype != DType::F32) {
    const int64_t w = a_.out_channels * (C_ / a_.groups) * a_.kernel * a_.kernel;
    n.scratch_bytes += 2 * static_cast<size_t>(w) * dtype_size(q.dtype);
  }
  return n;
}

}  // namespace dp::models
