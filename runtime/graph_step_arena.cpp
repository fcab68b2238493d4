// Graph's step arena on the CPU (issue 30, section 1): the memory plan is what the CPU runs. Every
// tensor of a step lives at the offset plan_step_memory's plan gives it for the batch, dtype, path
// (oneDNN or reference) and fusion plan the graph runs (graph_arena): each node's output and input
// gradients, what its layer keeps from forward to backward and its scratch (StepContext::mem), the
// input's channels-last copy and the loss's gradient (loss_gradient), in one storage: tensors
// whose lifetimes do not overlap share bytes, so a forward output no backward reads is transient.
// The storage is made for the largest batch planned so far; a smaller batch (the last partial one,
// an evaluation) is placed in the same bytes. A GPU graph does the same under gpu_step_arena_
// (train.gpu_step_arena) with only its own tensors, its outputs and input gradients (its layers
// keep their state in their own allocations, the trainer the loss's tensors); otherwise it
// allocates its activations one by one (graph.cpp, forward_node), each for the largest batch so far
// (a smaller one is a view of its bytes: ensure_capacity), and its input gradients in grad_arena_.
#include <algorithm>
#include <cstring>

#include "runtime/device_error.h"
#include "runtime/graph.h"
#include "runtime/last_dispatch.h"
#include "runtime/memory_account.h"
#include "runtime/step_memory.h"

namespace dp {
namespace {
// Offsets in the arena: as the input-gradient arena's (kernels' vector loads, a cache line and more).
constexpr size_t kStepArenaAlignment = 256;
}  // namespace

void Graph::use_gpu_step_arena(bool on) {
  DP_CHECK(built_ && !device_.is_cpu(), "a GPU step arena for a graph on {}", device_.str());
  if (gpu_step_arena_ == on) return;
  gpu_step_arena_ = on;
  for (Tensor& a : acts_) a = Tensor();  // the other scheme's outputs go
  step_arena_ = Tensor();
  grad_arena_ = Tensor();  // the input gradients' own arena, made again if the separate scheme runs
  placed_batch_ = 0, arena_batch_ = 0;
  grad_plan_bytes_.clear();  // the input gradients planned again, in the other arena
}

namespace {
// What the arena's plan is asked: the CPU's path and layout, or the GPU's with only the graph's
// own tensors (its layers keep their state themselves, its trainer the loss's tensors).
StepMemoryQuery arena_query(bool cpu, bool onednn, bool channels_last, bool graph_only, int64_t batch, DType act,
                            const std::vector<NodePlan>& fusion) {
  return StepMemoryQuery{.batch = batch,
                         .activations = act,
                         .path = !cpu ? MemoryPath::Cuda : onednn ? MemoryPath::CpuOnednn : MemoryPath::CpuReference,
                         .fusion = fusion,
                         .alignment = kStepArenaAlignment,
                         .channels_last = cpu && channels_last,
                         .graph_tensors_only = !cpu || graph_only};
}
}  // namespace

void Graph::place_step_arena(int64_t batch, DType act) {
  const bool cpu = device_.is_cpu();
  DP_CHECK(cpu ? cpu_planned_ : gpu_planned_ && gpu_step_arena_, "step arena of a graph on {} (planned: {})",
           device_.str(), planned());
  if (placed_batch_ != batch || placed_dtype_ != act) {
    const bool onednn = cpu_backend_ == CpuBackend::OneDnn && act == DType::F32;  // plan_cpu's rule
    const StepMemoryPlan plan =
        plan_step_memory(*this, arena_query(cpu, onednn, cpu_channels_last_ && act == DType::F32, graph_tensors_only_,
                                            batch, act, plan_));
    GraphArena places = graph_arena(plan);
    // A single output beyond the machine is named as the allocation of that output would name it.
    for (size_t i = 0; cpu && i < nodes_.size(); ++i) {
      const size_t bytes = bytes_of(with_batch(batch, nodes_[i].out_shape), act);
      if (places.output_offset[i] == GraphArena::kNone || bytes <= host_memory_bytes()) continue;
      HostMemoryError e(bytes, host_memory_bytes());
      e.add_context("the output of " + dispatch_site(nodes_[i].layer->name(), nodes_[i].layer->type(), "forward"));
      throw e;
    }
    allocate_step_arena(std::max<size_t>(places.bytes, 1), batch);
    arena_batch_ = std::max(arena_batch_, batch);
    for (size_t i = 0; i < nodes_.size(); ++i)
      acts_[i] = places.output_offset[i] == GraphArena::kNone
                     ? Tensor()  // a folded node: forward_nodes shares its host's output
                     : Tensor::view_of(step_arena_.storage(), places.output_offset[i],
                                       with_batch(batch, nodes_[i].out_shape), act);
    note_deaths(plan, places);
    step_places_ = std::move(places);
    placed_batch_ = batch, placed_dtype_ = act;
  }
  if (!poison_step_arena_) return;
  if (cpu) std::memset(step_arena_.storage()->data(), 0xFF, step_arena_.nbytes());
  else poison_device_bytes(0, step_arena_.nbytes());
}

void Graph::allocate_step_arena(size_t need, int64_t batch) {
  if (step_arena_.defined() && step_arena_.nbytes() >= need) return;
  // A plan for a smaller batch fits in a larger one's bytes (every tensor shrinks with the batch).
  DP_CHECK(!step_arena_.defined() || batch > arena_batch_,
           "the step plan for batch {} needs {} bytes, more than the {} bytes of the arena planned for batch {}", batch,
           need, step_arena_.nbytes(), arena_batch_);
  for (Tensor& a : acts_) a = Tensor();  // the old arena goes before the new one comes
  input_nhwc_ = Tensor();
  step_arena_ = Tensor();
  MemoryScope scope(MemoryCategory::Activations);  // the outputs and the input gradients
  const std::string what =
      fmt::format("the step arena of the model's activations and input gradients at batch {}", batch);
  try {
    step_arena_ = Tensor::zeros({static_cast<int64_t>(need)}, DType::U8, device_);
  } catch (HostMemoryError& e) {
    e.add_context(what);
    throw;
  } catch (DeviceOutOfMemory& e) {
    e.add_context(what);
    throw;
  }
}

// dead_after_: per step event, the arena ranges last read there (what poison_dead_tensors fills).
void Graph::note_deaths(const StepMemoryPlan& plan, const GraphArena& places) {
  dead_after_.assign(2 * nodes_.size() + 2, {});
  const auto dies = [&](const PlanTensor& t, size_t offset) {
    dead_after_[static_cast<size_t>(t.last)].emplace_back(offset, offset + t.bytes);
  };
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (plan.output_of[i] >= 0) dies(plan.tensors[static_cast<size_t>(plan.output_of[i])], places.output_offset[i]);
  for (size_t t = 0; t < plan.tensors.size(); ++t)  // the rest: the layers', the input copy, the loss's
    if ((t < plan.gradients_begin || t >= plan.gradients_end) &&
        std::find(plan.output_of.begin(), plan.output_of.end(), static_cast<int>(t)) == plan.output_of.end())
      dies(plan.tensors[t], plan.packing.offsets[t]);
  for (size_t b = plan.gradients_begin; b < plan.gradients_end; ++b)
    dies(plan.tensors[b], places.gradient_offset[b - plan.gradients_begin]);
}

LayerMemory Graph::layer_memory(int node, bool backward) const {
  if (!device_.is_cpu() || graph_tensors_only_ || step_places_.kept.empty()) return {};
  const auto i = static_cast<size_t>(node);
  const GraphArena::Span& kept = step_places_.kept[i];
  const GraphArena::Span& scratch = (backward ? step_places_.backward_scratch : step_places_.forward_scratch)[i];
  const auto offset = [](const GraphArena::Span& s) { return s.offset == GraphArena::kNone ? 0 : s.offset; };
  return LayerMemory{step_arena_.storage(), offset(kept), kept.bytes, offset(scratch), scratch.bytes};
}

Tensor Graph::loss_gradient() const {
  const GraphArena::Span& s = step_places_.loss_gradient;
  if (!device_.is_cpu() || placed_batch_ == 0 || s.offset == GraphArena::kNone) return Tensor();
  return Tensor::view_of(step_arena_.storage(), s.offset, with_batch(placed_batch_, output_shape()), DType::F32);
}

Tensor Graph::input_copy_place(const Shape& shape, DType dtype) const {
  const GraphArena::Span& s = step_places_.input_copy;
  if (s.offset == GraphArena::kNone || bytes_of(shape, dtype) != s.bytes) return Tensor();
  return Tensor::view_of(step_arena_.storage(), s.offset, shape, dtype);
}

void Graph::poison_dead_tensors(int event) {
  if (!poison_step_arena_ || !arena_placed() || static_cast<size_t>(event) >= dead_after_.size()) return;
  auto* base = static_cast<unsigned char*>(step_arena_.storage()->data());
  for (const auto& [offset, end] : dead_after_[static_cast<size_t>(event)]) {
    if (device_.is_cpu()) std::memset(base + offset, 0xFF, end - offset);
    else poison_device_bytes(offset, end - offset);
  }
}

}  // namespace dp
