// defines: Linear::backward_needs — what the linear layer's backward reads of its forward.
//   every path: its input (dW = dy^T x), not its output;
//   CPU oneDNN with a folded ReLU: its output too, and a scratch of the output's size for the
//     masked dy (OnednnState::masked_dy);
//   CUDA with a folded GELU: the pre-activation (gelu_pre_, the output's size), kept from the
//     forward and turned into the gradient in place by the backward.
#include "models/layers/linear/linear.h"

namespace dp::models {

BackwardNeeds Linear::backward_needs(const NeedsQuery& q) const {
  BackwardNeeds n{.input = true};
  if (q.epilogue == Epilogue::Relu) {
    n.output = true;
    n.scratch_bytes = bytes_of(q.out, q.dtype);
  }
  if (q.epilogue == Epilogue::Gelu) n.kept_bytes = bytes_of(q.out, q.dtype);
  return n;
}

}  // namespace dp::models
