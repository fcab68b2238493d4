#include "runtime/step_memory.h"

#include <algorithm>

#include "base/error.h"
#include "runtime/grad_plan.h"
#include "runtime/graph.h"

namespace dp {
namespace {

// The layer's run inputs (its inputs, then an AddRelu host's residual), as Graph::run_sources.
std::vector<int> sources_of(const Graph& g, const std::vector<NodePlan>& plan, size_t i) {
  std::vector<int> s = g.nodes()[i].inputs;
  if (plan[i].epilogue == Epilogue::AddRelu) s.push_back(plan[i].residual);
  return s;
}

bool nhwc_of(const Graph& g, const StepMemoryQuery& q) {
  return q.channels_last.value_or(cpu_channels_last(g, q.path, q.activations));
}

NeedsQuery needs_query(const Graph& g, const StepMemoryQuery& q, size_t i) {
  NeedsQuery nq{.dtype = q.activations,
                .path = q.path,
                .epilogue = q.fusion[i].epilogue,
                .channels_last = nhwc_of(g, q)};
  for (int src : sources_of(g, q.fusion, i))
    nq.in.push_back(with_batch(q.batch, src < 0 ? g.input_shape() : g.nodes()[static_cast<size_t>(src)].out_shape));
  nq.out = with_batch(q.batch, g.nodes()[i].out_shape);
  return nq;
}

// One planner node per graph node: a folded node is a view of its host (its first input made the
// one it aliases); a host asks its layer with its planned epilogue in the query.
std::vector<PlanNode> plan_nodes(const Graph& g, const StepMemoryQuery& q) {
  std::vector<PlanNode> nodes;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Graph::Node& gn = g.nodes()[i];
    const NodePlan& p = q.fusion[i];
    PlanNode n{.name = gn.layer->name(), .inputs = gn.inputs};
    if (p.folded_into >= 0) {
      n.view = true;
      auto host = std::find_if(n.inputs.begin(), n.inputs.end(), [&](int s) {
        return s == p.folded_into || (s >= 0 && q.fusion[static_cast<size_t>(s)].folded_into == p.folded_into);
      });
      if (host != n.inputs.end()) std::iter_swap(n.inputs.begin(), host);
      nodes.push_back(std::move(n));
      continue;
    }
    n.output_bytes = bytes_of(with_batch(q.batch, gn.out_shape), q.activations);
    n.needs = gn.layer->backward_needs(needs_query(g, q, i));
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// The input gradients as the graph's backward writes them (Graph::plan_input_gradients_for_step),
// their intervals moved from backward runs to step events: the run of node h at 2n - runs_at(h).
std::vector<PlanTensor> gradient_tensors(const Graph& g, const StepMemoryQuery& q) {
  const size_t n = g.nodes().size();
  const std::vector<BackwardStep> schedule = backward_schedule(q.fusion);
  std::vector<std::vector<int>> sources(n);
  std::vector<size_t> bytes(n);
  std::vector<std::string> names(n);
  for (size_t i = 0; i < n; ++i) {
    sources[i] = sources_of(g, q.fusion, i);
    bytes[i] = bytes_of(with_batch(q.batch, g.nodes()[i].out_shape), q.activations);
    names[i] = g.nodes()[i].layer->name();
  }
  std::vector<int> event_of_run;
  for (const BackwardStep& s : schedule)
    if (s.kind == BackwardStep::Kind::Run)
      event_of_run.push_back(static_cast<int>(2 * n) - q.fusion[static_cast<size_t>(s.node)].runs_at);
  event_of_run.push_back(static_cast<int>(2 * n));  // "to the end"
  GradientPlan gp = plan_input_gradients(schedule, sources, bytes, names, q.alignment);
  for (PlanTensor& t : gp.tensors) {
    t.first = event_of_run[static_cast<size_t>(t.first)];
    t.last = event_of_run[static_cast<size_t>(t.last)];
    if (t.first > t.last) std::swap(t.first, t.last);
  }
  return std::move(gp.tensors);
}

// The loss (event n) and the last node's output gradient, which is the caller's: under 16-bit
// activations the output cast to f32 for the loss, the f32 gradient it writes and its cast back
// to the compute dtype (Graph::output_f32, output_grad_in_compute); in f32 the loss writes the
// gradient the last node's backward reads.
void add_loss_tensors(const Graph& g, const StepMemoryQuery& q, std::vector<PlanTensor>& out) {
  const int n = static_cast<int>(g.nodes().size());
  const Shape s = with_batch(q.batch, g.output_shape());
  const std::string& last = g.nodes().back().layer->name();
  out.push_back(PlanTensor{"loss.dlogits_f32", n - 1, MemoryCategory::InputGradients, bytes_of(s, DType::F32), n, n + 1});
  if (q.activations == DType::F32) return;
  out.push_back(PlanTensor{"loss.logits_f32", n - 1, MemoryCategory::Activations, bytes_of(s, DType::F32), n - 1, n});
  out.push_back(PlanTensor{last + ".dout", n - 1, MemoryCategory::InputGradients, bytes_of(s, q.activations), n, n + 1});
}

// The input's channels-last copy (Graph::model_input): written before node 0's forward, read by
// the nodes that take the input and by the backward of those that keep their inputs.
void add_input_copy(const Graph& g, const StepMemoryQuery& q, const std::vector<PlanNode>& nodes,
                    std::vector<PlanTensor>& out) {
  const int n = static_cast<int>(nodes.size());
  int last = 0;
  for (int i = 0; i < n; ++i) {
    const auto& in = nodes[static_cast<size_t>(i)].inputs;
    if (std::find(in.begin(), in.end(), -1) == in.end()) continue;
    last = std::max(last, nodes[static_cast<size_t>(i)].needs.input ? 2 * n - i : i);
  }
  out.push_back(PlanTensor{"input.channels_last", -1, MemoryCategory::Activations,
                           bytes_of(with_batch(q.batch, g.input_shape()), q.activations), 0, last});
}

}  // namespace

StepMemoryPlan plan_step_memory(const Graph& g, const StepMemoryQuery& q) {
  DP_CHECK(g.built() && q.fusion.size() == g.nodes().size() && q.batch > 0,
           "plan_step_memory: a built graph of {} nodes, a plan of {}, batch {}", g.nodes().size(), q.fusion.size(),
           q.batch);
  StepMemoryPlan p;
  std::vector<PlanNode> nodes = plan_nodes(g, q);
  if (q.graph_tensors_only)
    for (PlanNode& node : nodes) node.needs.kept_bytes = node.needs.scratch_bytes = 0;
  const size_t n = nodes.size();
  for (const PlanNode& node : nodes) p.library_workspace = std::max(p.library_workspace, node.needs.library_workspace);
  p.output_of.assign(n, -1), p.kept_of.assign(n, -1);
  p.forward_scratch_of.assign(n, -1), p.backward_scratch_of.assign(n, -1);
  for (PlanTensor& t : step_lifetimes(nodes)) {
    if (t.category == MemoryCategory::InputGradients) continue;
    const auto node = static_cast<size_t>(t.node);
    const int index = static_cast<int>(p.tensors.size());
    if (t.category == MemoryCategory::Activations) p.output_of[node] = index;
    else if (t.name.ends_with(".kept")) p.kept_of[node] = index;
    else if (t.first == t.node) p.forward_scratch_of[node] = index;
    else p.backward_scratch_of[node] = index;
    p.tensors.push_back(std::move(t));
  }
  p.gradients_begin = p.tensors.size();
  for (PlanTensor& t : gradient_tensors(g, q)) p.tensors.push_back(std::move(t));
  p.gradients_end = p.tensors.size();
  if (!q.graph_tensors_only) {
    p.loss_gradient = static_cast<int>(p.tensors.size());
    add_loss_tensors(g, q, p.tensors);
  }
  if (!q.graph_tensors_only && input_copied_channels_last(g.input_shape(), nhwc_of(g, q))) {
    p.input_copy = static_cast<int>(p.tensors.size());
    add_input_copy(g, q, nodes, p.tensors);
  }
  p.packing = pack_tensors(p.tensors, q.alignment);
  p.lower_bound = peak_live_bytes(p.tensors, q.alignment);
  return p;
}

GraphArena graph_arena(const StepMemoryPlan& p) {
  const auto span = [&](int t) {
    return t < 0 ? GraphArena::Span{}
                 : GraphArena::Span{p.packing.offsets[static_cast<size_t>(t)], p.tensors[static_cast<size_t>(t)].bytes};
  };
  GraphArena a;
  for (int t : p.output_of) a.output_offset.push_back(t < 0 ? GraphArena::kNone : span(t).offset);
  for (size_t b = p.gradients_begin; b < p.gradients_end; ++b) {
    a.gradient_offset.push_back(p.packing.offsets[b]);
    a.gradient_bytes.push_back(p.tensors[b].bytes);
  }
  for (size_t i = 0; i < p.output_of.size(); ++i) {
    a.kept.push_back(span(p.kept_of[i]));
    a.forward_scratch.push_back(span(p.forward_scratch_of[i]));
    a.backward_scratch.push_back(span(p.backward_scratch_of[i]));
  }
  a.input_copy = span(p.input_copy);
  a.loss_gradient = span(p.loss_gradient);
  a.bytes = p.packing.arena_bytes;
  return a;
}

bool cpu_channels_last(const Graph& g, MemoryPath path, DType activations) {
  const auto nhwc = [](const Graph::Node& n) { return n.layer->cpu_channels_last(); };
  return path == MemoryPath::CpuOnednn && activations == DType::F32 &&
         std::all_of(g.nodes().begin(), g.nodes().end(), nhwc);
}

bool input_copied_channels_last(const Shape& input, bool channels_last) {
  return channels_last && input.size() == 3 && input[0] > 1;
}

std::vector<NodePlan> device_fusion_plan(const Graph& g, MemoryPath path, DType activations, bool gpu_fusion,
                                         bool cudnn_graph) {
  if (path == MemoryPath::Cuda && gpu_fusion)
    return plan_fusion(g.fusion_wiring(cudnn_graph ? FusionPath::GpuCudnnGraph : FusionPath::Gpu));
  if (path == MemoryPath::CpuOnednn && activations == DType::F32)
    return plan_fusion(g.fusion_wiring(FusionPath::CpuOnednn));
  return unfused_plan(g.nodes().size());
}

}  // namespace dp
