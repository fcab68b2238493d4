#include "runtime/gpu_fusion.h"

namespace dp {

std::vector<NodePlan> unfused_plan(size_t nodes) {
  std::vector<NodePlan> plan(nodes);
  for (size_t i = 0; i < nodes; ++i) plan[i].runs_at = static_cast<int>(i);
  return plan;
}

std::vector<NodePlan> plan_gpu_fusion(const std::vector<FusionNode>& nodes) {
  const int n = static_cast<int>(nodes.size());
  std::vector<NodePlan> plan = unfused_plan(nodes.size());
  // consumers[i]: the nodes reading node i's output, once per input slot (add(x, x) reads x twice).
  std::vector<std::vector<int>> consumers(nodes.size());
  for (int i = 0; i < n; ++i)
    for (int src : nodes[i].inputs)
      if (src >= 0 && src < i) consumers[src].push_back(i);
  const auto only_consumer = [&](int node) { return consumers[node].size() == 1 ? consumers[node][0] : -1; };
  const auto free_host = [&](int node, bool relu_only) {
    if (node < 0 || plan[node].epilogue != Epilogue::None) return false;
    return nodes[node].role == FusionRole::Host || (relu_only && nodes[node].role == FusionRole::ReluHost);
  };
  // 1. add + relu.
  for (int a = 0; a < n; ++a) {
    const FusionNode& add = nodes[a];
    if (add.role != FusionRole::Add || add.inputs.size() != 2) continue;
    const int r = only_consumer(a);
    if (r < 0 || nodes[r].role != FusionRole::Relu || nodes[r].inputs.size() != 1) continue;
    for (int k = 0; k < 2; ++k) {
      const int host = add.inputs[k];
      if (!free_host(host, false) || only_consumer(host) != a) continue;
      plan[host].epilogue = Epilogue::AddRelu;
      plan[host].residual = add.inputs[1 - k];
      plan[host].runs_at = a;
      plan[a] = {host, Epilogue::None, -1, -1};
      plan[r] = {host, Epilogue::None, -1, -1};
      break;
    }
  }
  // 2. relu.
  for (int r = 0; r < n; ++r) {
    if (nodes[r].role != FusionRole::Relu || nodes[r].inputs.size() != 1 || plan[r].folded_into >= 0) continue;
    const int host = nodes[r].inputs[0];
    if (!free_host(host, true) || only_consumer(host) != r) continue;
    plan[host].epilogue = Epilogue::Relu;
    plan[r] = {host, Epilogue::None, -1, -1};
  }
  // 3. gelu.
  for (int g = 0; g < n; ++g) {
    if (nodes[g].role != FusionRole::Gelu || nodes[g].inputs.size() != 1) continue;
    const int host = nodes[g].inputs[0];
    if (host < 0 || nodes[host].role != FusionRole::GeluHost || plan[host].epilogue != Epilogue::None ||
        only_consumer(host) != g)
      continue;
    plan[host].epilogue = Epilogue::Gelu;
    plan[g] = {host, Epilogue::None, -1, -1};
  }
  return plan;
}

}  // namespace dp
