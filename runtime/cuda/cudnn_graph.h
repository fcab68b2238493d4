// defines: the project's one wrapper of cuDNN's graph API — GraphPlan (a chosen execution plan:
// NVIDIA's cudnn-frontend graph for one PlanKey and the engine config that won, its workspace),
// PlanRequest, choose_graph_plan (the process-wide plan cache: describe, ask the heuristics, build,
// time, choose once per PlanChoiceKey; NoGraphPlan, graph_candidates.h, when nothing runs). CUDA
// builds only.
//
// Convolutions (models/layers/conv2d/conv2d_graph_cuda.cpp) and scaled-dot-product attention
// (GraphOp::SdpaFprop / SdpaBprop, runtime/cuda/sdpa_graph.h) go through it. The frontend's types
// stay inside runtime/cuda/cudnn_graph.cpp, the one translation unit that includes its headers.
//
// On a cache miss (the first use of a shape): for each tier of descriptions, each description
// becomes a frontend graph; heuristics mode A, then B, then the fallback list give engine
// configs; engines whose numerical notes the key's math mode rules out, and configs over the
// workspace limit, are deselected; up to kMaxTimedCandidates plans are built in the order of
// graph_candidates.h (support is checked by building) and each is run once and then timed
// kTimingRepeats times on the caller's tensors with CUDA events; the lowest median wins (ties to
// the heuristics' earlier config). The choice is logged once at debug level (subsystem "cudnn").
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/cuda/graph_candidates.h"
#include "runtime/cuda/graph_plan_key.h"

namespace dp::cuda {

class ExecContext;

// One description of a computation and the device pointers (in key.tensors' order) its
// candidates are timed on. Timing runs the plans on them: outputs are overwritten (every
// graph op's outputs are overwrite-only), inputs only read.
struct PlanRequest {
  PlanKey key;
  std::vector<void*> ptrs;
};

class GraphPlan {
 public:
  struct Impl;
  explicit GraphPlan(std::unique_ptr<Impl> impl);
  ~GraphPlan();
  GraphPlan(const GraphPlan&) = delete;
  GraphPlan& operator=(const GraphPlan&) = delete;

  const PlanKey& key() const;           // the description that won
  int64_t workspace_bytes() const;
  const std::string& engine() const;    // cuDNN's engine config name, e.g. "eng12_k2=1_k3=0"
  // Runs the plan on gpu.compute() with gpu.workspace(workspace_bytes()). ptrs: device pointers
  // in key().tensors' order, each at least as aligned as the key says (DpError otherwise);
  // DpError naming the plan and the key when cuDNN refuses.
  void execute(ExecContext& gpu, std::span<void* const> ptrs) const;

 private:
  std::unique_ptr<Impl> impl_;
};

// The plan for the computation `tiers` describes (PlanChoiceKey: alternatives of a tier are timed
// against each other; a later tier only when no engine runs an earlier one): from gpu's cache
// (ExecContext::graph_plans, one per process), or made as above on the requests' pointers and
// cached. gpu's handle, stream and workspace limit are used. `who` names the caller (the layer)
// in errors. DpError for a key that validate_plan_key refuses; NoGraphPlan when nothing runs.
std::shared_ptr<const GraphPlan> choose_graph_plan(ExecContext& gpu, const std::vector<std::vector<PlanRequest>>& tiers,
                                                   const std::string& who);

}  // namespace dp::cuda
