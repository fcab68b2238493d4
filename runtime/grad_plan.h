// defines: the backward schedule — the order Graph::backward runs its layers and hands a folded
// node's gradient to its host — and the input-gradient plan over it: every gradient buffer the
// step's backward writes, its interval in backward runs, and its offset in one arena
// (runtime/memory_plan.h's packing). Pure: the graph runs its backward from the same schedule and
// takes each layer's dx from the plan's offsets, so what is planned is what runs; `dptrain memory`
// can plan without a device.
//
// Why: each layer's backward overwrites a gradient for each of its inputs (dx). The first one
// written for a node becomes that node's output gradient and lives until the backward that
// consumes it (its own, or its host's when folded); a later consumer's dx is added into it and
// dies at once. Before this plan the graph kept a spare tensor per distinct shape, which on
// ResNet-50 held 4.1 GiB (docs/cuda.md); planned, the gradients in flight share a few buffers.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "runtime/fusion_plan.h"
#include "runtime/memory_plan.h"

namespace dp {

// One step of backward in node order from the last: Move — node `node` is folded into `host`,
// its gradient (if any) becomes the host's; Run — `node`'s layer runs its backward.
struct BackwardStep {
  enum class Kind { Move, Run };
  Kind kind = Kind::Run;
  int node = -1;
  int host = -1;  // Move only
  bool operator==(const BackwardStep&) const = default;
};

// The schedule of a fusion plan (runtime/fusion_plan.h; every node runs at its own position when
// nothing is folded): for i from the last node down, a folded i moves its gradient to its host
// and, when i is where the host runs, the host runs; any other node runs at its runs_at position.
std::vector<BackwardStep> backward_schedule(std::span<const NodePlan> plan);

struct GradientPlan {
  std::vector<PlanTensor> tensors;  // one per buffer: "<node's name>.dout" or "<...>.dx_sum" (a summand)
  // Per Run step (in schedule order), per source of that run (sources[node]'s order): the buffer
  // its dx is written to (-1: the source is the model input, no gradient), and whether that dx
  // becomes the source's gradient (true) or is added into it (false).
  std::vector<std::vector<int>> dx_buffer;
  std::vector<std::vector<char>> dx_is_first;
  Packing packing;
};

// sources[node]: the nodes whose outputs node's layer takes (Graph::run_sources; -1: the model
// input). grad_bytes[node]: bytes of node's output gradient (its output's shape and dtype).
// names[node]: for the tensors' names. The last node's gradient is the caller's (the loss's): not
// planned. alignment: each buffer's offset (a power of two).
GradientPlan plan_input_gradients(std::span<const BackwardStep> schedule, std::span<const std::vector<int>> sources,
                                  std::span<const size_t> grad_bytes, std::span<const std::string> names,
                                  size_t alignment);

}  // namespace dp
