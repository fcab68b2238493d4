// defines: the memory plan's two pure halves (issue 30, section 1) —
//   step_lifetimes: from a static graph's order and what each node's backward reads, the step
//     event interval over which every activation, kept tensor and gradient must live;
//   pack_tensors: offsets in one arena such that two tensors whose intervals overlap never share
//     a byte (greedy by size, best fit: Pisarchyk & Lee, "Efficient Memory Management for Deep
//     Neural Net Inference", 2020, the offset variant TensorFlow Lite's arena planner uses);
// and peak_live_bytes, the lower bound any packing is judged by.
//
// Step events, in order (a graph of n nodes in topological order, node i = forward event i):
//   0 .. n-1        forward of node 0 .. n-1
//   n               the loss (reads the last node's output, writes its gradient)
//   n+1 .. 2n       backward of node n-1 .. 0 (node i's backward is event 2n - i)
//   2n+1            the optimizer (reads the gradient arena, not planned here)
// An interval [first, last] is inclusive: a tensor written at `first` and last read at `last`.
// Nothing here allocates or touches a device; the planner is the same for the CPU and the GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/memory_account.h"

namespace dp {

// One tensor of the plan: its size, its live interval in step events, and for reports what it is.
struct PlanTensor {
  std::string name;  // "conv1.out", "conv1.dout", "bn1.mask"
  int node = -1;     // the graph node that owns it (the layer named in `dptrain memory`)
  MemoryCategory category = MemoryCategory::Activations;
  size_t bytes = 0;
  int first = 0;  // first step event it must exist in (written there)
  int last = 0;   // last step event that reads it (>= first)
};

// What one node's backward reads besides its output gradient, as its layer declares it for the
// path and dtype it runs on (a ReLU: its output; a convolution: its input; an add: nothing).
struct BackwardNeeds {
  bool input = false;   // the forward's inputs (all of them)
  bool output = false;  // the forward's output
  size_t kept_bytes = 0;     // kept from forward to backward besides them: a mask, statistics, a workspace
  size_t scratch_bytes = 0;  // transient inside forward or backward, gone when the call returns
  // The library workspace (a GPU's, not the arena's) one call of its backward must have whatever
  // train.workspace_mb says: cuDNN's deterministic attention backward (runtime/cuda/
  // graph_plan_key.h plan_workspace_limit). The workspace is the larger of the cap and these.
  size_t library_workspace = 0;
};

// One node of the static graph as the planner sees it: its inputs (earlier nodes; -1: the batch,
// which the input pipeline owns and is not planned), the bytes of its output and of that
// output's gradient, and its backward's needs. A view (flatten, a reshape) aliases its first
// input and that input's gradient: it has no bytes of its own, and whoever reads the view reads
// the input (its readers extend the input's life; their gradients are the input's).
struct PlanNode {
  std::string name;
  std::vector<int> inputs;
  size_t output_bytes = 0;
  size_t grad_bytes = 0;  // the gradient w.r.t. the output (backward), usually output_bytes
  BackwardNeeds needs;
  bool view = false;
};

// Every planned tensor of one training step of `nodes` (topological order; the last node's output
// is the loss's input): each output ("<name>.out", Activations) lives from its forward to its last
// reader — a later forward, the loss, or a backward that needs it (its own, with needs.output; a
// consumer's, with that consumer's needs.input); each output gradient ("<name>.dout",
// InputGradients) from the first backward that writes it (the latest consumer's, or the loss) to
// its node's backward; kept extras ("<name>.kept", LayerState) from forward to backward; scratch
// ("<name>.scratch", LayerState) only in its forward and backward events (planned as one interval
// per event). Zero-byte tensors are left out. Pure.
std::vector<PlanTensor> step_lifetimes(std::span<const PlanNode> nodes);

// An offset per tensor (same order) in one arena, each a multiple of `alignment` (a power of two):
// tensors in descending size (ties: earlier first, then the input order) each take the smallest gap
// between already placed tensors whose intervals overlap its own that fits it, else the end.
struct Packing {
  std::vector<size_t> offsets;
  size_t arena_bytes = 0;  // the plan's peak: the end of the highest tensor
};
Packing pack_tensors(std::span<const PlanTensor> tensors, size_t alignment);

// The largest sum of the bytes (each rounded up to `alignment`) of tensors live in one event: no
// packing can use less. Pure.
size_t peak_live_bytes(std::span<const PlanTensor> tensors, size_t alignment);

// Where the CPU graph places the tensors of a step (runtime/step_memory.h's graph_arena, made
// from a step plan; Graph's step arena): every planned tensor, in one arena.
struct GraphArena {
  static constexpr size_t kNone = SIZE_MAX;
  struct Span {
    size_t offset = kNone, bytes = 0;  // kNone: none
  };
  std::vector<size_t> output_offset;    // per node (kNone: shares its host's output, or none)
  std::vector<size_t> gradient_offset;  // per input-gradient buffer (runtime/grad_plan.h's)
  std::vector<size_t> gradient_bytes;   // per input-gradient buffer, as planned
  std::vector<Span> kept, forward_scratch, backward_scratch;  // per node: its layer's (Layer::backward_needs)
  Span input_copy, loss_gradient;       // the model input's channels-last copy; the loss's f32 gradient
  size_t bytes = 0;                     // the arena
};

// "" when no two tensors with overlapping intervals overlap in [offset, offset + bytes), each
// offset is aligned and inside arena_bytes; else the first clash, naming both tensors. Pure (the
// tests' and the debug build's check of a packing).
std::string check_packing(std::span<const PlanTensor> tensors, const Packing& p, size_t alignment);

}  // namespace dp
