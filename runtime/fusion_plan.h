// defines: plan_fusion, the one folding plan of a graph (a CPU graph under oneDNN, a GPU graph
// under train.gpu_fusion), as a pure function of the graph's wiring: which relu, add and gelu
// nodes fold into the layer before them (its host), with what epilogue (runtime/epilogue.h) and
// residual, and where in the node order the folded work runs. What differs between the CPU and
// the GPU is only what each host can apply on the path (Layer::applicable_epilogues), so the rules
// are written once. Exact by construction: a node is folded only when nothing else reads the
// values the fusion no longer stores (a folded GELU is cuBLASLt's, rounded as its own, not the
// gelu layer's, kernel).
//
// A host is free while it has no epilogue and is not folded itself. Rules, in this order:
//   1. add + relu: an add A whose only consumer is a relu R, with an input B that can apply
//      AddRelu, is free and whose only consumer is A: A and R fold into B (epilogue AddRelu,
//      residual = A's other input). B's layer runs at A's position, where both of A's inputs
//      exist (B's own position may come before the residual's producer, as in torchvision's
//      downsampling blocks). If both inputs qualify (an add of two batch norms), the first is the
//      host and the second stays a node of its own whose output is the residual.
//   2. one follower: a relu (or a tanh gelu) F, not folded by rule 1, whose input S can apply
//      Relu (Gelu), is free and has F as its only consumer: F folds into S (epilogue Relu, Gelu);
//      S runs at its own position.
// ResNet's `bn -> relu` and `bn [-> add <- shortcut] -> relu` are exactly these shapes on the GPU,
// GPT's MLP `c_fc -> gelu` the second; on the CPU nothing applies AddRelu or Gelu, and rule 2 folds
// each relu into the convolution, batch norm, linear or add before it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/epilogue.h"

namespace dp {

// What the planner needs to know of a node.
struct FusionNode {
  EpilogueSet absorbs;                  // what its layer can apply on the plan's path (Layer::applicable_epilogues)
  Follower follower = Follower::Other;  // what it is after a host (Layer::as_follower)
  std::vector<int> inputs;              // earlier nodes' indices, or -1 (the model input)
};

// The plan for one node.
struct NodePlan {
  int folded_into = -1;                // a folded relu/add/gelu: the host node whose layer applies it (-1: not folded)
  Epilogue epilogue = Epilogue::None;  // a host: what its layer applies to its output
  int residual = -1;                   // AddRelu: the node whose output is added (-1: the model input)
  int runs_at = -1;                    // the position in node order where this node's layer runs; -1: folded, never
};

std::vector<NodePlan> plan_fusion(const std::vector<FusionNode>& nodes);
// Every node runs at its own position, nothing folded.
std::vector<NodePlan> unfused_plan(size_t nodes);

}  // namespace dp
