// Graph's fusion, shared by its CPU plan (graph_cpu_plan.cpp) and its GPU plan
// (graph_gpu_plan.cpp): the wiring runtime/fusion_plan.h plans over on a path, and the plan
// adopted: each layer told its epilogue (Layer::set_epilogue), the one representation every path
// reads.
#include "runtime/graph.h"

namespace dp {

std::vector<FusionNode> Graph::fusion_wiring(FusionPath path) const {
  std::vector<FusionNode> wiring;
  wiring.reserve(nodes_.size());
  for (const Node& n : nodes_) wiring.push_back({n.layer->applicable_epilogues(path), n.layer->as_follower(), n.inputs});
  return wiring;
}

void Graph::adopt_plan(std::vector<NodePlan> plan) {
  DP_CHECK(built_ && plan.size() == nodes_.size(), "a plan of {} nodes for a graph of {}", plan.size(), nodes_.size());
  for (size_t i = 0; i < plan_.size(); ++i)
    if (plan_[i].folded_into >= 0) acts_[i] = Tensor();  // shared its host's output: not its own
  plan_ = std::move(plan);
  schedule_.clear();  // the backward schedule and its gradient plan follow the plan
  grad_plan_bytes_.clear();
  placed_batch_ = 0, arena_batch_ = 0;  // the CPU's step arena is placed again for this plan
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].layer->set_epilogue(plan_[i].epilogue);
}

void Graph::use_plan_for_testing(std::vector<NodePlan> plan) {
  adopt_plan(std::move(plan));
  if (device_.is_cpu()) {
    cpu_planned_ = true;
    cpu_channels_last_ = false;
    cpu_plan_dtype_ = DType::F32;
  } else {
    gpu_planned_ = true;
  }
}

}  // namespace dp
