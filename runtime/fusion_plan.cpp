#include "runtime/fusion_plan.h"

namespace dp {

std::vector<NodePlan> unfused_plan(size_t nodes) {
  std::vector<NodePlan> plan(nodes);
  for (size_t i = 0; i < nodes; ++i) plan[i].runs_at = static_cast<int>(i);
  return plan;
}

namespace {

// The epilogue a single follower folds as (rule 2), or None for the others.
Epilogue folds_as(Follower f) {
  return f == Follower::Relu ? Epilogue::Relu : f == Follower::TanhGelu ? Epilogue::Gelu : Epilogue::None;
}

}  // namespace

std::vector<NodePlan> plan_fusion(const std::vector<FusionNode>& nodes) {
  const int n = static_cast<int>(nodes.size());
  std::vector<NodePlan> plan = unfused_plan(nodes.size());
  // consumers[i]: the nodes reading node i's output, once per input slot (add(x, x) reads x twice).
  std::vector<std::vector<int>> consumers(nodes.size());
  for (int i = 0; i < n; ++i)
    for (int src : nodes[i].inputs)
      if (src >= 0 && src < i) consumers[src].push_back(i);
  const auto only_consumer = [&](int node) { return consumers[node].size() == 1 ? consumers[node][0] : -1; };
  const auto folded = [&](int node) { return plan[node].folded_into >= 0; };
  // A host takes one epilogue, and a folded node has no run of its own to apply one in.
  const auto free_host = [&](int node, Epilogue e) {
    return node >= 0 && nodes[node].absorbs.has(e) && plan[node].epilogue == Epilogue::None && !folded(node);
  };
  const auto fold = [&](int follower, int host) { plan[follower] = {host, Epilogue::None, -1, -1}; };
  // 1. add + relu.
  for (int a = 0; a < n; ++a) {
    const FusionNode& add = nodes[a];
    if (add.follower != Follower::Add || add.inputs.size() != 2 || plan[a].epilogue != Epilogue::None) continue;
    const int r = only_consumer(a);
    if (r < 0 || nodes[r].follower != Follower::Relu || nodes[r].inputs.size() != 1) continue;
    for (int k = 0; k < 2; ++k) {
      const int host = add.inputs[k];
      if (!free_host(host, Epilogue::AddRelu) || only_consumer(host) != a) continue;
      plan[host].epilogue = Epilogue::AddRelu;
      plan[host].residual = add.inputs[1 - k];
      plan[host].runs_at = a;
      fold(a, host);
      fold(r, host);
      break;
    }
  }
  // 2. one follower (relu, tanh gelu).
  for (int f = 0; f < n; ++f) {
    const Epilogue e = folds_as(nodes[f].follower);
    if (e == Epilogue::None || nodes[f].inputs.size() != 1 || folded(f)) continue;
    const int host = nodes[f].inputs[0];
    if (!free_host(host, e) || only_consumer(host) != f) continue;
    plan[host].epilogue = e;
    fold(f, host);
  }
  return plan;
}

}  // namespace dp
