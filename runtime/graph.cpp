#include "runtime/graph.h"

#include <fmt/ranges.h>

#include <unordered_set>

#include "kernels/cpu/elementwise.h"
#include "runtime/graph_observer.h"
#include "runtime/memory_account.h"

namespace dp {

int Graph::add(std::unique_ptr<Layer> layer, const std::vector<std::string>& inputs) {
  DP_CHECK(!built_, "graph already built; cannot add '{}'", layer->name());
  if (find(layer->name()) >= 0) DP_THROW_USER("layer name '{}' is used twice", layer->name());
  Node n;
  if (inputs.empty()) {
    n.inputs = {nodes_.empty() ? kInput : static_cast<int>(nodes_.size()) - 1};
  } else {
    for (const auto& in : inputs) {
      if (in == "input") {
        n.inputs.push_back(kInput);
        continue;
      }
      int idx = find(in);
      if (idx < 0)
        DP_THROW_USER("layer '{}' takes input '{}', which is not an earlier layer (layers must be listed after "
                      "their inputs; 'input' is the model input)",
                      layer->name(), in);
      n.inputs.push_back(idx);
    }
  }
  if (static_cast<int>(n.inputs.size()) != layer->num_inputs())
    DP_THROW_USER("layer '{}' ({}) takes {} input(s), but {} given", layer->name(), layer->type(),
                  layer->num_inputs(), n.inputs.size());
  n.layer = std::move(layer);
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::find(const std::string& name) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].layer->name() == name) return static_cast<int>(i);
  return -1;
}

// Build, top to bottom: every layer's shapes and parameters declared, the parameters initialised
// on the CPU, placed on the device, the gradient (and 16-bit) arenas made, each layer bound to its
// slots.
void Graph::build(const Shape& input_shape, uint64_t seed, Device device, DType compute, cuda::ExecContext* gpu,
                  ArenaMemory grad_memory) {
  DP_CHECK(!built_, "graph built twice");
  DP_CHECK(!nodes_.empty(), "empty graph");
  DP_CHECK(device.is_cpu() ? compute == DType::F32 && gpu == nullptr : gpu != nullptr,
           "graph on {}: compute {} with{} an execution context", device.str(), dtype_name(compute),
           gpu ? "" : "out");
  DP_CHECK(compute == DType::F32 || compute == DType::BF16 || compute == DType::F16, "compute dtype {}",
           dtype_name(compute));
  input_shape_ = input_shape;
  device_ = device;
  compute_ = compute;
  gpu_ = gpu;
  const std::vector<std::vector<ParamDecl>> decls = declare_layers();
  init_params(decls, seed);
  place_on_device();
  make_grad_arenas(grad_memory);
  bind_layers();
  acts_.assign(nodes_.size(), Tensor());
  dacts_.assign(nodes_.size(), Tensor());
  built_ = true;
  refresh_compute_params();
}

// Each node's output shape from its inputs', and its parameters: an arena slot (trainable), a
// slot of an earlier layer (tied) or a buffer. Returns every node's declarations.
std::vector<std::vector<ParamDecl>> Graph::declare_layers() {
  std::vector<std::vector<ParamDecl>> decls(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    auto& n = nodes_[i];
    std::vector<Shape> in;
    for (int src : n.inputs) in.push_back(src == kInput ? input_shape_ : nodes_[src].out_shape);
    n.out_shape = n.layer->setup(in);
    decls[i] = n.layer->declare_params();
    for (const auto& d : decls[i]) {
      std::string full = n.layer->name() + "." + d.name;
      if (!d.tied_to.empty()) {
        DP_CHECK(d.trainable, "buffer {} cannot be tied", full);
        const int slot = tied_slot(full, d);
        n.bound_slots.push_back(slot);
        n.tied_names.push_back(full);
        n.tied_slots.push_back(slot);
      } else if (d.trainable) {
        DP_CHECK(d.dtype == DType::F32, "trainable parameter {} must be f32", full);
        n.param_slots.push_back(params_.add(full, d.shape));
        n.bound_slots.push_back(n.param_slots.back());
      } else {
        n.buffer_ids.push_back(static_cast<int>(buffers_.size()));
        MemoryScope scope(MemoryCategory::Parameters);  // buffers count with the parameters
        buffers_.push_back({full, Tensor::zeros(d.shape, d.dtype, Device::cpu())});
      }
    }
  }
  return decls;
}

// Initialise on the CPU, one RNG stream per parameter, so adding a layer never changes the
// others' values.
void Graph::init_params(const std::vector<std::vector<ParamDecl>>& decls, uint64_t seed) {
  {
    MemoryScope scope(MemoryCategory::Parameters);
    params_.allocate(DType::F32, Device::cpu());
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    size_t p = 0, b = 0;
    for (const auto& d : decls[i]) {
      if (!d.tied_to.empty()) continue;  // its owner initialises it
      Tensor t = d.trainable ? params_.tensor(nodes_[i].param_slots[p++]) : buffers_[nodes_[i].buffer_ids[b++]].tensor;
      if (!d.init) continue;
      Rng rng(seed, kStreamInit + (static_cast<uint64_t>(i) << 8) + (p + b) * 0x100000ull);
      d.init(t, rng);
    }
  }
}

// The parameters and buffers onto the graph's device (nothing to do on the CPU).
void Graph::place_on_device() {
  if (device_.is_cpu()) return;
  MemoryScope scope(MemoryCategory::Parameters);
  Arena on_dev = params_.like(DType::F32, device_);
  on_dev.flat().copy_from(params_.flat());
  params_ = std::move(on_dev);
  for (auto& b : buffers_) {
    Tensor t = Tensor::zeros(b.tensor.shape(), b.tensor.dtype(), device_);
    t.copy_from(b.tensor);
    b.tensor = t;
  }
}

// The gradient arena, and under mixed precision the 16-bit copies of the parameters and gradients.
void Graph::make_grad_arenas(ArenaMemory grad_memory) {
  DP_CHECK(grad_memory == ArenaMemory::Allocated || (device_.is_cpu() && compute_ == DType::F32),
           "a paged gradient arena is for f32 CPU graphs, not {} in {}", device_.str(), dtype_name(compute_));
  {
    MemoryScope scope(MemoryCategory::Gradients);
    grads_ = params_.like(DType::F32, device_, grad_memory);
  }
  if (compute_ == DType::F32) return;
  {
    MemoryScope scope(MemoryCategory::ComputeParams);
    lp_params_ = params_.like(compute_, device_);
  }
  MemoryScope scope(MemoryCategory::ComputeGrads);
  lp_grads_ = params_.like(compute_, device_);
}

// Each layer gets its parameter, gradient and buffer tensors (16-bit ones where it computes in them).
void Graph::bind_layers() {
  const bool mixed = compute_ != DType::F32;
  for (auto& n : nodes_) {
    n.low_precision = mixed && n.layer->low_precision_params();
    const Arena& p_arena = n.low_precision ? lp_params_ : params_;
    const Arena& g_arena = n.low_precision ? lp_grads_ : grads_;
    std::vector<Tensor> ps, gs, bs;
    for (int s : n.bound_slots) ps.push_back(p_arena.tensor(s)), gs.push_back(g_arena.tensor(s));
    for (int b : n.buffer_ids) bs.push_back(buffers_[b].tensor);
    n.layer->bind(std::move(ps), std::move(gs), std::move(bs));
  }
}

int Graph::tied_slot(const std::string& full, const ParamDecl& d) const {
  for (int s = 0; s < params_.size(); ++s) {
    if (params_.slot(s).name != d.tied_to) continue;
    if (params_.slot(s).shape != d.shape)
      DP_THROW_USER("parameter '{}' is tied to '{}', but their shapes differ: {} and {}", full, d.tied_to,
                    shape_str(d.shape), shape_str(params_.slot(s).shape));
    return s;
  }
  std::vector<std::string> names;
  for (const auto& sl : params_.slots()) names.push_back(sl.name);
  DP_THROW_USER("parameter '{}' is tied to '{}', which is not a parameter of an earlier layer (earlier parameters: "
                "{})",
                full, d.tied_to, names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
}

DType Graph::activation_dtype(const Tensor& x) const {
  if (is_floating(x.dtype())) return device_.is_cpu() ? x.dtype() : compute_;
  for (const auto& n : nodes_)
    for (int src : n.inputs)
      if (src == kInput && !n.layer->takes_integer_input())
        DP_THROW_USER("layer '{}' ({}) takes the model input, which is {} ids (e.g. token ids); only a layer that "
                      "takes ids (embedding) can: begin the model with an 'embedding' layer, or feed float samples",
                      n.layer->name(), n.layer->type(), dtype_name(x.dtype()));
  return device_.is_cpu() ? DType::F32 : compute_;
}

const Tensor& Graph::forward_nodes(const StepContext& step_ctx, const Tensor& x) {
  DP_CHECK(built_, "forward before build");
  Shape want = with_batch(x.dim(0), input_shape_);
  if (x.shape() != want)
    DP_THROW_USER("model input has shape {}, expected {} (batch, then the model's input shape)", shape_str(x.shape()),
                  shape_str(want));
  const bool cpu = device_.is_cpu();
  const DType act = activation_dtype(x);
  if (!cpu) {
    DP_CHECK(x.device() == device_ && (x.dtype() == compute_ || !is_floating(x.dtype())),
             "model input {} on a graph built for {} {}", x.describe(), dtype_name(compute_), device_.str());
    DP_CHECK(step_ctx.gpu == gpu_ && step_ctx.compute == compute_, "step context does not match the graph's device setup");
  } else if (!cpu_planned_ || act != cpu_plan_dtype_) {
    plan_cpu(act);
  }
  const StepContext ctx = cpu ? cpu_context(step_ctx) : step_ctx;
  if (!cpu && !gpu_planned_) plan_gpu();
  const int64_t n = x.dim(0);
  if (arena_placed()) place_step_arena(n, act);
  input_ = cpu ? model_input(x) : x;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    const int host = plan_[i].folded_into;
    if (host >= 0) {  // applied by its host's layer (run here when this is its place): share its output
      if (plan_[host].runs_at == i) forward_node(ctx, host, n, act, x.device());
      acts_[i] = acts_[host];
      poison_dead_tensors(i);
      continue;
    }
    if (plan_[i].runs_at == i) forward_node(ctx, i, n, act, x.device());  // else a host that runs at a later position
    poison_dead_tensors(i);
  }
  if (compute_ != DType::F32) return output_f32();  // the loss and the metrics read f32 scores
  if (cpu && ctx.channels_last && acts_.back().ndim() == 4) {  // callers see NCHW
    change_layout(output_nchw_, acts_.back(), false);
    return output_nchw_;
  }
  return acts_.back();
}

void Graph::backward_nodes(const StepContext& step_ctx, const Tensor& dy, const std::function<void(int)>& on_ready) {
  DP_CHECK(input_.defined(), "backward before forward");
  DP_CHECK(dy.shape() == acts_.back().shape(), "output gradient {} does not match output {}", dy.describe(),
           acts_.back().describe());
  const bool gpu = !device_.is_cpu();
  DP_CHECK(planned(), "backward without a planned forward");
  const StepContext ctx = gpu ? step_ctx : cpu_context(step_ctx);
  // dacts_[i]: gradient w.r.t. node i's output, summed over its consumers.
  std::vector<bool> have(nodes_.size(), false);
  // The loss gave an f32 gradient; under mixed precision the last layer takes 16-bit; a CPU graph
  // with channels-last activations takes a 4-D one NHWC.
  if (compute_ != DType::F32) {
    dacts_.back() = output_grad_in_compute(dy);
  } else if (!gpu && ctx.channels_last && dy.ndim() == 4) {
    change_layout(dy_nhwc_, dy, true);
    dacts_.back() = dy_nhwc_;
  } else {
    dacts_.back() = dy;
  }
  have.back() = true;
  plan_input_gradients_for_step();
  const int n = static_cast<int>(nodes_.size());
  poison_dead_tensors(n);  // what the loss read last (step events: runtime/memory_plan.h)
  size_t run = 0;
  for (const BackwardStep& s : schedule_) {
    if (s.kind == BackwardStep::Kind::Run) {
      backward_node(ctx, s.node, run++, have, on_ready);
      poison_dead_tensors(2 * n - plan_[s.node].runs_at);
      continue;
    }
    // Folded: its gradient is its host's, whose backward runs where the schedule says.
    if (!have[s.node]) continue;
    DP_CHECK(!have[s.host], "folded node '{}': its host '{}' has another consumer", nodes_[s.node].layer->name(),
             nodes_[s.host].layer->name());
    dacts_[s.host] = std::move(dacts_[s.node]);
    have[s.host] = true;
  }
}

std::vector<int> Graph::run_sources(int node) const {
  std::vector<int> srcs = nodes_[node].inputs;
  if (plan_[node].epilogue == Epilogue::AddRelu) srcs.push_back(plan_[node].residual);
  return srcs;
}

void Graph::forward_node(const StepContext& ctx, int i, int64_t batch, DType act, Device dev) {
  Node& node = nodes_[i];
  MemoryOwner owner(i);
  if (observer_) observer_->node_begin(i, false);
  std::vector<Tensor> in;
  for (int src : run_sources(i)) in.push_back(src == kInput ? input_ : acts_[src]);
  const Shape out = with_batch(batch, node.out_shape);
  Tensor& y = acts_[i];
  if (!y.fits(out, act, dev)) {  // a GPU graph's own outputs (placed ones are views of the step arena)
    MemoryScope scope(MemoryCategory::Activations);
    if (dev.is_cpu()) y = Tensor::zeros(out, act, dev);
    else ensure_capacity(y, out, act, dev);  // a smaller batch in the largest one's bytes
  }
  {
    MemoryScope scope(MemoryCategory::LayerState);  // what the layer saves for backward, its scratch
    StepContext c = ctx;
    c.mem = layer_memory(i, false);
    node.layer->forward(c, in, y);
  }
  if (observer_) observer_->node_end(i, false);
}

void Graph::backward_node(const StepContext& ctx, int i, size_t run, std::vector<bool>& have,
                          const std::function<void(int)>& on_ready) {
  Node& node = nodes_[i];
  const bool gpu = !device_.is_cpu();
  MemoryOwner owner(i);
  if (observer_) observer_->node_begin(i, true);
  const std::vector<int> srcs = run_sources(i);
  std::vector<Tensor> in, dx;
  const std::vector<int>& bufs = grad_plan_.dx_buffer[run];
  for (size_t k = 0; k < srcs.size(); ++k) {
    const int src = srcs[k];
    in.push_back(src == kInput ? input_ : acts_[src]);
    if (src == kInput) dx.emplace_back();
    else dx.push_back(grad_buffer(bufs[k], acts_[src].shape(), acts_[src].dtype()));  // layers overwrite dx
  }
  if (!have[i]) {
    // Output unused by the loss (cannot happen in a graph with a single sink, kept for safety).
    MemoryScope scope(MemoryCategory::InputGradients);
    dacts_[i] = Tensor::zeros(acts_[i].shape(), acts_[i].dtype(), acts_[i].device());
  }
  {
    MemoryScope scope(MemoryCategory::LayerState);
    StepContext c = ctx;
    c.mem = layer_memory(i, true);
    node.layer->backward(c, in, acts_[i], dacts_[i], dx);
  }
  for (size_t k = 0; k < srcs.size(); ++k) {
    const int src = srcs[k];
    if (src == kInput) continue;
    DP_CHECK(have[src] != (grad_plan_.dx_is_first[run][k] != 0),
             "the input-gradient plan and the backward disagree on node '{}' at '{}'", nodes_[src].layer->name(),
             node.layer->name());
    if (!have[src]) {
      dacts_[src] = std::move(dx[k]);
      have[src] = true;
      continue;
    }
    if (gpu) accumulate_device(dacts_[src], dx[k]);
    else if (dx[k].dtype() == DType::F64)
      kernels::cpu::add_inplace(dacts_[src].data<double>(), dx[k].data<double>(), dx[k].numel());
    else
      kernels::cpu::add_inplace(dacts_[src].data<float>(), dx[k].data<float>(), dx[k].numel());
  }
  dacts_[i] = Tensor();  // consumed: its bytes are the plan's again
  if (node.low_precision) widen_low_precision_grads(node);
  if (observer_) observer_->node_end(i, true);
  if (!node.param_slots.empty() && on_ready) on_ready(i);
}

void Graph::zero_grad() {
  if (!device_.is_cpu()) zero_grad_device();
  else grads_.flat().zero_();
}

std::vector<Graph::NamedTensor> Graph::state() const {
  std::vector<NamedTensor> out;
  for (const auto& n : nodes_) {
    // Registration order per layer: trainable then buffers, as torch's state_dict does
    // (parameters before buffers within a module).
    for (int s : n.param_slots) out.push_back({params_.slot(s).name, params_.tensor(s), ""});
    for (size_t k = 0; k < n.tied_slots.size(); ++k)
      out.push_back({n.tied_names[k], params_.tensor(n.tied_slots[k]), params_.slot(n.tied_slots[k]).name});
    for (int b : n.buffer_ids) out.push_back(buffers_[b]);
  }
  return out;
}

std::string Graph::summary() const {
  std::string s;
  for (const auto& n : nodes_) {
    int64_t np = 0;
    for (int p : n.param_slots) np += params_.slot(p).numel;
    std::string tied;
    for (int t : n.tied_slots) tied += fmt::format(" (+ tied {})", params_.slot(t).name);
    s += fmt::format("  {:<28} {:<16} out {:<18} params {}{}\n", n.layer->name(), n.layer->type(), shape_str(n.out_shape),
                     np, tied);
  }
  return s;
}

}  // namespace dp
