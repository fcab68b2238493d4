// Graph's GPU plan (graph.h, set_gpu_fusion): runtime/fusion_plan.h on the GPU's path (under
// cuDNN's graph API convolutions take a ReLU too), adopted as the CPU plan's is (graph_fusion.cpp),
// and its log line.
#include <algorithm>

#include "runtime/graph.h"

namespace dp {

void Graph::set_gpu_fusion(bool on) {
  gpu_fusion_ = on;
  gpu_planned_ = false;  // planned again at the next forward
}

void Graph::plan_gpu() {
  DP_CHECK(built_ && !device_.is_cpu(), "GPU plan of a graph not built for a GPU");
  const FusionPath path = gpu_convolutions_fuse_relu() ? FusionPath::GpuCudnnGraph : FusionPath::Gpu;
  adopt_plan(gpu_fusion_ ? plan_fusion(fusion_wiring(path)) : unfused_plan(nodes_.size()));
  gpu_planned_ = true;
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
