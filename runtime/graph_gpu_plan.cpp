// Graph's GPU plan (graph.h, set_gpu_fusion): the relus and adds runtime/gpu_fusion.h folds into
// the batch norms before them, handed to the layers as their epilogues, and the relus it folds into
// convolutions under cuDNN's graph API (their fused ReLU).
#include <algorithm>

#include "runtime/graph.h"

namespace dp {

void Graph::set_gpu_fusion(bool on) {
  gpu_fusion_ = on;
  gpu_planned_ = false;  // planned again at the next forward
}

void Graph::plan_gpu() {
  DP_CHECK(built_ && !device_.is_cpu(), "GPU plan of a graph not built for a GPU");
  for (size_t i = 0; i < plan_.size(); ++i)
    if (plan_[i].folded_into >= 0) acts_[i] = Tensor();  // shared its host's output: not its own
  plan_ = gpu_fusion_ ? plan_gpu_fusion(fusion_wiring()) : unfused_plan(nodes_.size());
  hand_epilogues_to_layers();
  gpu_planned_ = true;
}

// A batch norm takes its epilogue as such, a linear layer its GELU; a convolution (a ReluHost)
// its folded ReLU.
void Graph::hand_epilogues_to_layers() {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Layer& l = *nodes_[i].layer;
    const Epilogue e = plan_[i].epilogue;
    if (l.can_fuse_gpu_epilogue() || e == Epilogue::None || e == Epilogue::Gelu) {
      l.set_gpu_epilogue(e);
      if (!l.can_fuse_gpu_epilogue() && l.gpu_can_fuse_relu()) l.set_fused_relu(false);
    } else {
      DP_CHECK(e == Epilogue::Relu && l.gpu_can_fuse_relu(), "layer '{}' ({}) given a {} epilogue", l.name(), l.type(),
               epilogue_name(e));
      l.set_fused_relu(true);
    }
  }
}

std::vector<FusionNode> Graph::fusion_wiring() const {
  std::vector<FusionNode> wiring;
  const bool conv_relu = !device_.is_cpu() && gpu_convolutions_fuse_relu();
  for (const Node& n : nodes_) {
    const Layer& l = *n.layer;
    const FusionRole role = l.can_fuse_gpu_epilogue()            ? FusionRole::Host
                            : conv_relu && l.gpu_can_fuse_relu() ? FusionRole::ReluHost
                            : l.gpu_can_fuse_gelu()              ? FusionRole::GeluHost
                            : l.is_relu()                        ? FusionRole::Relu
                            : l.is_add()                         ? FusionRole::Add
                            : l.is_tanh_gelu()                   ? FusionRole::Gelu
                                                                 : FusionRole::Other;
    wiring.push_back({role, n.inputs});
  }
  return wiring;
}

void Graph::use_plan_for_testing(std::vector<NodePlan> plan) {
  DP_CHECK(built_ && plan.size() == nodes_.size(), "a plan of {} nodes for a graph of {}", plan.size(), nodes_.size());
  for (size_t i = 0; i < plan_.size(); ++i)
    if (plan_[i].folded_into >= 0) acts_[i] = Tensor();
  plan_ = std::move(plan);
  for (auto& n : nodes_) n.layer->set_fused_relu(false);
  hand_epilogues_to_layers();
  if (device_.is_cpu()) {
    cpu_planned_ = true;
    cpu_channels_last_ = false;
    cpu_plan_dtype_ = DType::F32;
  } else {
    gpu_planned_ = true;
  }
}

std::string Graph::gpu_plan_summary() {
  if (!gpu_planned_) plan_gpu();
  std::string fused;
  for (size_t h = 0; h < nodes_.size(); ++h) {
    if (plan_[h].epilogue == Epilogue::None) continue;
    fused += (fused.empty() ? "" : " ") + nodes_[h].layer->name();
    for (size_t i = h + 1; i < nodes_.size(); ++i)
      if (plan_[i].folded_into == static_cast<int>(h)) fused += "+" + nodes_[i].layer->name();
  }
  if (!gpu_fusion_) return fmt::format("convolutions: {}; GPU fusion: off (train.gpu_fusion = false)", gpu_convolution_api());
  return fmt::format("convolutions: {}; GPU fusion: {} layers apply the ReLU, residual add + ReLU or GELU after them: [{}]",
                     gpu_convolution_api(),
                     std::count_if(plan_.begin(), plan_.end(), [](const NodePlan& p) { return p.epilogue != Epilogue::None; }),
                     fused);
}

}  // namespace dp
