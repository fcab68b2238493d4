// Graph's input gradients from a plan (runtime/grad_plan.h): the schedule its backward runs, the
// buffers' offsets, and the one arena they live in.
#include <algorithm>

#include "runtime/graph.h"
#include "runtime/memory_account.h"

namespace dp {
namespace {
// Offsets of gradient buffers: enough for every kernel's vector loads and cuDNN's 16-byte
// alignment, on the CPU a cache line and more.
constexpr size_t kGradAlignment = 256;
}  // namespace

void Graph::plan_input_gradients_for_step() {
  const size_t n = nodes_.size();
  bool replan = false;
  if (schedule_.empty()) {
    schedule_ = backward_schedule(plan_);
    replan = true;
  }
  if (grad_plan_bytes_.size() != n) grad_plan_bytes_.assign(n, SIZE_MAX), replan = true;
  for (size_t i = 0; i < n; ++i) {
    const size_t bytes = acts_[i].defined() ? acts_[i].nbytes() : 0;
    if (grad_plan_bytes_[i] != bytes) grad_plan_bytes_[i] = bytes, replan = true;
  }
  if (!replan) return;
  std::vector<std::vector<int>> sources(n);
  std::vector<std::string> names(n);
  for (size_t i = 0; i < n; ++i) {
    sources[i] = run_sources(static_cast<int>(i));
    names[i] = nodes_[i].layer->name();
  }
  grad_plan_ = plan_input_gradients(schedule_, sources, grad_plan_bytes_, names, kGradAlignment);
  if (arena_placed()) {  // the buffers are in the step arena, placed by the same plan
    DP_CHECK(grad_plan_.tensors.size() == step_places_.gradient_bytes.size(),
             "the graph's backward has {} input-gradient buffers, its step plan {}", grad_plan_.tensors.size(),
             step_places_.gradient_bytes.size());
    for (size_t b = 0; b < grad_plan_.tensors.size(); ++b)
      DP_CHECK(grad_plan_.tensors[b].bytes == step_places_.gradient_bytes[b],
               "input-gradient buffer '{}': {} bytes in the backward, {} in the step plan", grad_plan_.tensors[b].name,
               grad_plan_.tensors[b].bytes, step_places_.gradient_bytes[b]);
    return;
  }
  const size_t bytes = std::max<size_t>(grad_plan_.packing.arena_bytes, 1);
  if (!grad_arena_.defined() || grad_arena_.nbytes() < bytes) {
    grad_arena_ = Tensor();  // the old arena goes before the new one comes
    MemoryScope scope(MemoryCategory::InputGradients);
    grad_arena_ = Tensor::zeros({static_cast<int64_t>(bytes)}, DType::U8, device_);
  }
}

Tensor Graph::grad_buffer(int b, const Shape& shape, DType dtype) const {
  DP_CHECK(b >= 0 && static_cast<size_t>(b) < grad_plan_.tensors.size(), "input-gradient buffer {} of {}", b,
           grad_plan_.tensors.size());
  const bool placed = arena_placed();
  const size_t offset = (placed ? step_places_.gradient_offset : grad_plan_.packing.offsets)[static_cast<size_t>(b)];
  Tensor t = Tensor::view_of((placed ? step_arena_ : grad_arena_).storage(), offset, shape, dtype);
  DP_CHECK(t.nbytes() <= grad_plan_.tensors[static_cast<size_t>(b)].bytes, "input-gradient buffer {} ('{}') is {} bytes, asked {}",
           b, grad_plan_.tensors[static_cast<size_t>(b)].name, grad_plan_.tensors[static_cast<size_t>(b)].bytes,
           t.nbytes());
  return t;
}

}  // namespace dp
