// defines: plan_step_memory — the memory plan of one training step of a built graph, without
// running it or touching a device: every activation, what each layer's backward keeps
// (Layer::backward_needs on the path the step runs on), each layer's scratch, the input gradients
// as the graph's backward writes them (runtime/grad_plan.h: the same schedule and buffers) and the
// loss's tensors, with their lifetimes over the step's events (runtime/memory_plan.h), packed into
// one arena. `dptrain memory` reports its peak; the same plan for the CPU and the GPU.
//
// Folding (runtime/fusion_plan.h) is the device's: the GPU plan under train.gpu_fusion, the CPU's
// under oneDNN with f32. A folded node shares its host's output (a view in the plan), and the
// host's layer declares what it keeps with its epilogue set (set here for the query, and put back).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backward_needs.h"
#include "runtime/fusion_plan.h"
#include "runtime/memory_plan.h"

namespace dp {

class Graph;

struct StepMemoryQuery {
  int64_t batch = 1;
  DType activations = DType::F32;  // the activations' dtype (the compute dtype on a GPU)
  MemoryPath path = MemoryPath::CpuReference;
  std::vector<NodePlan> fusion;    // the device's folding plan (unfused_plan when nothing folds)
  size_t alignment = 256;          // each tensor's offset (the input-gradient arena's)
  // The CPU graph's layout when the caller knows it (Graph::place_step_arena: its own plan's);
  // unset: cpu_channels_last's rule, what the graph would plan.
  std::optional<bool> channels_last;
  // Only the graph's own tensors, the nodes' outputs and input gradients: the GPU graph's arena
  // (Graph::place_step_arena), whose layers keep their state in their own allocations and whose
  // trainer owns the loss's tensors. `dptrain memory` plans them all (false).
  bool graph_tensors_only = false;
};

struct StepMemoryPlan {
  std::vector<PlanTensor> tensors;  // activations (.out), kept (.kept), scratch, gradients, the loss's
  Packing packing;                  // packing.arena_bytes: the planned activation arena
  size_t lower_bound = 0;           // peak_live_bytes: what no packing can beat
  size_t library_workspace = 0;     // the largest BackwardNeeds::library_workspace of the nodes
  // Which of `tensors` are the graph's own: per node, its output (-1: a folded node, which shares
  // its host's, or none), and the input-gradient buffers of runtime/grad_plan.h's plan, buffer b
  // being tensors[gradients_begin + b], up to gradients_end.
  std::vector<int> output_of;
  size_t gradients_begin = 0, gradients_end = 0;
  // Per node, what its layer keeps from forward to backward and its scratch in forward and in
  // backward (tensors' indices; -1: none); the model input's channels-last copy and the loss's
  // f32 gradient of the last node's output (-1: none).
  std::vector<int> kept_of, forward_scratch_of, backward_scratch_of;
  int input_copy = -1, loss_gradient = -1;
};

// The plan of one training step (forward, loss, backward) of `g` (built; any device) at q.batch.
StepMemoryPlan plan_step_memory(const Graph& g, const StepMemoryQuery& q);

// Where the CPU graph places a step's tensors (Graph, graph_step_arena.cpp): every tensor of the
// plan at the plan's own offset (its packing), so the arena is the plan's activations exactly:
// the outputs and input gradients, what each layer keeps and its scratch (handed to the layer in
// StepContext::mem), the input's channels-last copy and the loss's f32 gradient (the caller's
// to write: Graph::loss_gradient). Pure.
GraphArena graph_arena(const StepMemoryPlan& p);

// Whether a CPU graph on `path` stores its 4-D activations channels last (the rule Graph::plan_cpu
// runs: f32 on oneDNN, every layer taking NHWC), and whether a graph with that layout copies a
// model input of per-sample shape `input` (Graph::model_input: 4-D with more than one channel;
// one channel: NHWC is NCHW). Pure.
bool cpu_channels_last(const Graph& g, MemoryPath path, DType activations);
bool input_copied_channels_last(const Shape& input, bool channels_last);

// The fusion plan the graph would run with: `gpu_fusion` on a GPU path (FusionPath::Gpu, or
// GpuCudnnGraph when `cudnn_graph`), oneDNN's on the CPU with f32; else nothing folded.
std::vector<NodePlan> device_fusion_plan(const Graph& g, MemoryPath path, DType activations, bool gpu_fusion,
                                         bool cudnn_graph);

}  // namespace dp
