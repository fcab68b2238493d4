// defines: plan_gpu_fusion, the GPU plan's folding decisions (Graph on a GPU, train.gpu_fusion),
// as a pure function of the graph's wiring: which relu, add and gelu nodes fold into the layer
// before them (a batch norm: Layer::can_fuse_gpu_epilogue; a linear layer: a GELU), with what
// epilogue (runtime/epilogue.h) and residual, and where in the node order the folded work runs.
// Exact by construction: a node is folded only when nothing else reads the values the fusion no
// longer stores (a folded GELU is cuBLASLt's, rounded as its own, not the gelu layer's, kernel).
//
// Rules, in this order:
//   1. add + relu: an add A whose only consumer is a relu R, with an input B that can fuse and
//      whose only consumer is A: A and R fold into B (epilogue AddRelu, residual = A's other
//      input). B's layer runs at A's position, where both of A's inputs exist (B's own position
//      may come before the residual's producer, as in torchvision's downsampling blocks). If
//      both inputs qualify (an add of two batch norms), the first is the host and the second
//      stays a node of its own whose output is the residual.
//   2. relu: a relu R whose input S can fuse (a Host, or a ReluHost: a convolution under cuDNN's
//      graph API, which fuses a ReLU only), with R its only consumer (and S not already a host):
//      R folds into S (epilogue Relu); S runs at its own position.
//   3. gelu: a tanh GELU G whose input L can apply a GELU (a GeluHost: a linear layer on
//      cuBLASLt), with G its only consumer: G folds into L (epilogue Gelu); L runs at its own
//      position.
// ResNet's `bn -> relu` and `bn [-> add <- shortcut] -> relu` are exactly the first two shapes,
// GPT's MLP `c_fc -> gelu` the third.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/epilogue.h"

namespace dp {

// What the planner needs to know of a node.
enum class FusionRole : uint8_t {
  Other,
  Host,      // its layer can apply either epilogue (Layer::can_fuse_gpu_epilogue: batch norm)
  ReluHost,  // its layer can apply a ReLU only (Layer::gpu_can_fuse_relu, under cuDNN's graph API)
  Relu,  // a plain ReLU (Layer::is_relu)
  Add,   // a plain two-input sum (Layer::is_add)
  GeluHost,  // its layer can apply a GELU (Layer::gpu_can_fuse_gelu: a linear layer)
  Gelu,      // a GELU with the tanh approximation (Layer::is_tanh_gelu)
};
struct FusionNode {
  FusionRole role = FusionRole::Other;
  std::vector<int> inputs;  // earlier nodes' indices, or -1 (the model input)
};

// The plan for one node.
struct NodePlan {
  int folded_into = -1;                // a folded relu/add: the host node whose layer applies it (-1: not folded)
  Epilogue epilogue = Epilogue::None;  // a host: what its layer applies to its output
  int residual = -1;                   // AddRelu: the node whose output is added (-1: the model input)
  int runs_at = -1;                    // the position in node order where this node's layer runs; -1: folded, never
};

std::vector<NodePlan> plan_gpu_fusion(const std::vector<FusionNode>& nodes);
// Every node runs at its own position, nothing folded.
std::vector<NodePlan> unfused_plan(size_t nodes);

}  // namespace dp
