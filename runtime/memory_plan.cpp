#include "runtime/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace dp {
namespace {

size_t round_up(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

bool overlap_in_time(const PlanTensor& a, const PlanTensor& b) { return a.first <= b.last && b.first <= a.last; }

void add(std::vector<PlanTensor>& out, const PlanNode& n, int node, const char* suffix, MemoryCategory c,
         size_t bytes, int first, int last) {
  if (bytes == 0) return;
  out.push_back(PlanTensor{n.name + suffix, node, c, bytes, first, last});
}

// The nodes that read node i's output, views looked through (a view's readers read i); n stands
// for the loss when i, or a view of it, is the last node.
void readers_of(std::span<const PlanNode> nodes, int i, std::vector<int>& out) {
  const int n = static_cast<int>(nodes.size());
  if (i == n - 1) out.push_back(n);
  for (int j = i + 1; j < n; ++j) {
    const PlanNode& c = nodes[static_cast<size_t>(j)];
    if (std::find(c.inputs.begin(), c.inputs.end(), i) == c.inputs.end()) continue;
    if (c.view && c.inputs.front() == i) readers_of(nodes, j, out);
    else out.push_back(j);
  }
}

// The last step event that reads node i's output: its last reader's forward (or the loss), its
// own backward if it keeps its output, a reader's backward if that reader keeps its input.
int last_reader_of_output(std::span<const PlanNode> nodes, int i, const std::vector<int>& readers) {
  const int n = static_cast<int>(nodes.size());
  int last = i;
  if (nodes[static_cast<size_t>(i)].needs.output) last = 2 * n - i;
  for (int j : readers) {
    last = std::max(last, j);
    if (j < n && nodes[static_cast<size_t>(j)].needs.input) last = std::max(last, 2 * n - j);
  }
  return last;
}

// The step event that first writes node i's output gradient: the loss when it reads i, else the
// backward of the latest reader (backward runs in reverse order). -1: nothing reads the output.
int first_writer_of_gradient(std::span<const PlanNode> nodes, const std::vector<int>& readers) {
  const int n = static_cast<int>(nodes.size());
  if (readers.empty()) return -1;
  const int latest = *std::max_element(readers.begin(), readers.end());
  return latest == n ? n : 2 * n - latest;
}

}  // namespace

std::vector<PlanTensor> step_lifetimes(std::span<const PlanNode> nodes) {
  const int n = static_cast<int>(nodes.size());
  std::vector<PlanTensor> out;
  std::vector<int> readers;
  for (int i = 0; i < n; ++i) {
    const PlanNode& node = nodes[static_cast<size_t>(i)];
    const int backward = 2 * n - i;
    if (node.view) continue;  // its bytes are its input's
    readers.clear();
    readers_of(nodes, i, readers);
    add(out, node, i, ".out", MemoryCategory::Activations, node.output_bytes, i,
        last_reader_of_output(nodes, i, readers));
    const int writer = first_writer_of_gradient(nodes, readers);
    if (writer >= 0) add(out, node, i, ".dout", MemoryCategory::InputGradients, node.grad_bytes, writer, backward);
    add(out, node, i, ".kept", MemoryCategory::LayerState, node.needs.kept_bytes, i, backward);
    add(out, node, i, ".scratch", MemoryCategory::LayerState, node.needs.scratch_bytes, i, i);
    add(out, node, i, ".scratch", MemoryCategory::LayerState, node.needs.scratch_bytes, backward, backward);
  }
  return out;
}

Packing pack_tensors(std::span<const PlanTensor> tensors, size_t alignment) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (tensors[a].bytes != tensors[b].bytes) return tensors[a].bytes > tensors[b].bytes;
    return tensors[a].first < tensors[b].first;
  });
  Packing p;
  p.offsets.assign(tensors.size(), 0);
  std::vector<size_t> placed;  // indices, in placement order
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed tensors live at the same time
  for (size_t t : order) {
    const size_t size = round_up(tensors[t].bytes, alignment);
    busy.clear();
    for (size_t q : placed)
      if (overlap_in_time(tensors[t], tensors[q]))
        busy.emplace_back(p.offsets[q], p.offsets[q] + round_up(tensors[q].bytes, alignment));
    std::sort(busy.begin(), busy.end());
    size_t end = 0, best = 0, best_gap = SIZE_MAX;
    for (const auto& [lo, hi] : busy) {
      if (lo > end && lo - end >= size && lo - end < best_gap) best = end, best_gap = lo - end;
      end = std::max(end, hi);
    }
    p.offsets[t] = best_gap != SIZE_MAX ? best : end;
    p.arena_bytes = std::max(p.arena_bytes, p.offsets[t] + size);
    placed.push_back(t);
  }
  return p;
}

size_t peak_live_bytes(std::span<const PlanTensor> tensors, size_t alignment) {
  int events = 0;
  for (const PlanTensor& t : tensors) events = std::max(events, t.last + 1);
  std::vector<size_t> live(static_cast<size_t>(events), 0);
  for (const PlanTensor& t : tensors)
    for (int e = t.first; e <= t.last; ++e) live[static_cast<size_t>(e)] += round_up(t.bytes, alignment);
  return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
}

std::string check_packing(std::span<const PlanTensor> tensors, const Packing& p, size_t alignment) {
  if (p.offsets.size() != tensors.size())
    return fmt::format("{} offsets for {} tensors", p.offsets.size(), tensors.size());
  for (size_t a = 0; a < tensors.size(); ++a) {
    const size_t a_end = p.offsets[a] + round_up(tensors[a].bytes, alignment);
    if (p.offsets[a] % alignment != 0) return fmt::format("{} at offset {} is not {}-aligned", tensors[a].name, p.offsets[a], alignment);
    if (a_end > p.arena_bytes) return fmt::format("{} ends at {}, past the arena's {}", tensors[a].name, a_end, p.arena_bytes);
    for (size_t b = a + 1; b < tensors.size(); ++b) {
      const size_t b_end = p.offsets[b] + round_up(tensors[b].bytes, alignment);
      if (overlap_in_time(tensors[a], tensors[b]) && p.offsets[a] < b_end && p.offsets[b] < a_end)
        return fmt::format("{} [{}, {}) and {} [{}, {}) are live together (events {}-{} and {}-{}) and share bytes",
                           tensors[a].name, p.offsets[a], a_end, tensors[b].name, p.offsets[b], b_end,
                           tensors[a].first, tensors[a].last, tensors[b].first, tensors[b].last);
    }
  }
  return "";
}

}  // namespace dp
