#include "runtime/grad_plan.h"

#include "base/error.h"

namespace dp {

std::vector<BackwardStep> backward_schedule(std::span<const NodePlan> plan) {
  std::vector<BackwardStep> s;
  for (int i = static_cast<int>(plan.size()) - 1; i >= 0; --i) {
    const NodePlan& p = plan[static_cast<size_t>(i)];
    if (p.folded_into >= 0) {
      s.push_back({BackwardStep::Kind::Move, i, p.folded_into});
      if (plan[static_cast<size_t>(p.folded_into)].runs_at == i) s.push_back({BackwardStep::Kind::Run, p.folded_into});
      continue;
    }
    if (p.runs_at == i) s.push_back({BackwardStep::Kind::Run, i});
  }
  return s;
}

namespace {
constexpr int kNone = -1;      // no gradient yet
constexpr int kCallers = -2;   // the loss's gradient of the last node: not planned

// One Run step at event `event`: a buffer per non-input source; the first for a source becomes its
// gradient, the others are summands that die in this run. Then the run's own gradient is consumed.
void plan_run(int h, int event, std::span<const std::vector<int>> sources, std::span<const size_t> grad_bytes,
              std::span<const std::string> names, std::vector<int>& buf_of, GradientPlan& gp) {
  std::vector<int>& bufs = gp.dx_buffer.emplace_back();
  std::vector<char>& first = gp.dx_is_first.emplace_back();
  for (int src : sources[static_cast<size_t>(h)]) {
    if (src < 0) {
      bufs.push_back(-1), first.push_back(0);
      continue;
    }
    const bool becomes = buf_of[static_cast<size_t>(src)] == kNone;
    const int b = static_cast<int>(gp.tensors.size());
    gp.tensors.push_back(PlanTensor{names[static_cast<size_t>(src)] + (becomes ? ".dout" : ".dx_sum"), src,
                                    MemoryCategory::InputGradients, grad_bytes[static_cast<size_t>(src)], event, event});
    if (becomes) buf_of[static_cast<size_t>(src)] = b;
    bufs.push_back(b), first.push_back(becomes ? 1 : 0);
  }
  int& own = buf_of[static_cast<size_t>(h)];
  if (own >= 0) gp.tensors[static_cast<size_t>(own)].last = event;
  if (own != kCallers) own = kNone;
}
}  // namespace

GradientPlan plan_input_gradients(std::span<const BackwardStep> schedule, std::span<const std::vector<int>> sources,
                                  std::span<const size_t> grad_bytes, std::span<const std::string> names,
                                  size_t alignment) {
  const size_t n = grad_bytes.size();
  DP_CHECK(sources.size() == n && names.size() == n && n > 0, "plan_input_gradients: {} sources, {} sizes, {} names",
           sources.size(), n, names.size());
  GradientPlan gp;
  std::vector<int> buf_of(n, kNone);
  buf_of.back() = kCallers;
  int event = 0;
  for (const BackwardStep& s : schedule) {
    if (s.kind == BackwardStep::Kind::Move) {
      int& from = buf_of[static_cast<size_t>(s.node)];
      if (from != kNone) buf_of[static_cast<size_t>(s.host)] = from, from = kNone;
      continue;
    }
    plan_run(s.node, event++, sources, grad_bytes, names, buf_of, gp);
  }
  for (int b : buf_of)  // written but never consumed (an output only some dead branch reads): to the end
    if (b >= 0) gp.tensors[static_cast<size_t>(b)].last = event;
  gp.packing = pack_tensors(gp.tensors, alignment);
  return gp;
}

}  // namespace dp
