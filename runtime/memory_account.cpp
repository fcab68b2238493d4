#include "runtime/memory_account.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "base/error.h"
#include "base/pages.h"

namespace dp {

namespace {
std::array<std::atomic<size_t>, kMemoryCategories> g_live{};
std::atomic<size_t> g_total{0}, g_peak{0};
thread_local MemoryCategory t_category = MemoryCategory::Other;
thread_local int t_owner = -1;
std::mutex g_node_mu;
std::map<int, size_t> g_by_node;

struct Mapped {
  MemoryCategory category;
  size_t bytes, peak;
};
std::mutex g_mapped_mu;
std::map<const void*, Mapped>& mapped() {
  static auto* m = new std::map<const void*, Mapped>();
  return *m;
}
// Resident bytes of one mapping now; raises its peak. Under g_mapped_mu.
size_t measure(const void* base, Mapped& m) {
  const size_t r = resident_bytes(base, m.bytes);
  m.peak = std::max(m.peak, r);
  return r;
}

double mib(size_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }
}  // namespace

const char* memory_category_name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::Other: return "other";
    case MemoryCategory::Parameters: return "parameters";
    case MemoryCategory::ComputeParams: return "compute_params";
    case MemoryCategory::Gradients: return "gradients";
    case MemoryCategory::ComputeGrads: return "compute_grads";
    case MemoryCategory::OptimizerState: return "optimizer_state";
    case MemoryCategory::Activations: return "activations";
    case MemoryCategory::InputGradients: return "input_gradients";
    case MemoryCategory::LayerState: return "layer_state";
    case MemoryCategory::Input: return "input";
    case MemoryCategory::Count: break;
  }
  return "?";
}

MemoryScope::MemoryScope(MemoryCategory c) : prev_(t_category) { t_category = c; }
MemoryScope::~MemoryScope() { t_category = prev_; }

MemoryOwner::MemoryOwner(int node) : prev_(t_owner) { t_owner = node; }
MemoryOwner::~MemoryOwner() { t_owner = prev_; }

MemoryCategory current_memory_category() { return t_category; }
int current_memory_owner() { return t_owner; }

std::vector<std::pair<int, size_t>> memory_by_node(size_t top) {
  std::vector<std::pair<int, size_t>> v;
  {
    std::lock_guard<std::mutex> lock(g_node_mu);
    for (const auto& [n, b] : g_by_node)
      if (b > 0) v.emplace_back(n, b);
  }
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > top) v.resize(top);
  return v;
}

void memory_charge(MemoryCategory c, int node, size_t bytes) {
  if (node >= 0) {
    std::lock_guard<std::mutex> lock(g_node_mu);
    g_by_node[node] += bytes;
  }
  g_live[static_cast<size_t>(c)].fetch_add(bytes, std::memory_order_relaxed);
  size_t total = g_total.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  size_t peak = g_peak.load(std::memory_order_relaxed);
  while (total > peak && !g_peak.compare_exchange_weak(peak, total, std::memory_order_relaxed)) {
  }
}

void memory_credit(MemoryCategory c, int node, size_t bytes) {
  if (node >= 0) {
    std::lock_guard<std::mutex> lock(g_node_mu);
    g_by_node[node] -= bytes;
  }
  g_live[static_cast<size_t>(c)].fetch_sub(bytes, std::memory_order_relaxed);
  g_total.fetch_sub(bytes, std::memory_order_relaxed);
}

MemoryBreakdown memory_breakdown() {
  MemoryBreakdown b;
  for (int i = 0; i < kMemoryCategories; ++i)
    b.live[static_cast<size_t>(i)] = g_live[static_cast<size_t>(i)].load(std::memory_order_relaxed);
  b.peak = g_peak.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g_mapped_mu);
    for (auto& [base, m] : mapped()) {
      b.live[static_cast<size_t>(m.category)] += measure(base, m);
      b.peak += m.peak;
    }
  }
  for (size_t v : b.live) b.total += v;
  return b;
}

void reset_memory_peak() {
  g_peak.store(g_total.load(std::memory_order_relaxed), std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_mapped_mu);
  for (auto& [base, m] : mapped()) m.peak = resident_bytes(base, m.bytes);
}

void memory_add_mapped(MemoryCategory c, const void* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mapped_mu);
  mapped()[base] = Mapped{c, bytes, 0};
}

void memory_remove_mapped(const void* base) {
  std::lock_guard<std::mutex> lock(g_mapped_mu);
  mapped().erase(base);
}

MappedUse memory_sample_mapped(const void* base) {
  std::lock_guard<std::mutex> lock(g_mapped_mu);
  auto it = mapped().find(base);
  if (it == mapped().end()) return {};
  const size_t r = measure(base, it->second);
  return {it->second.bytes, r, it->second.peak};
}

std::string memory_table(const MemoryBreakdown& b, size_t device_live, size_t device_peak) {
  std::string s = fmt::format("{:<16} {:>14} {:>10} {:>6}\n", "category", "bytes", "MiB", "share");
  for (int i = 0; i < kMemoryCategories; ++i) {
    size_t v = b.live[static_cast<size_t>(i)];
    double share = b.total > 0 ? 100.0 * static_cast<double>(v) / static_cast<double>(b.total) : 0.0;
    s += fmt::format("{:<16} {:>14} {:>10.1f} {:>5.1f}%\n", memory_category_name(static_cast<MemoryCategory>(i)), v,
                     mib(v), share);
  }
  s += fmt::format("{:<16} {:>14} {:>10.1f}\n", "sum (live)", b.total, mib(b.total));
  s += fmt::format("{:<16} {:>14} {:>10.1f}\n", "peak (account)", b.peak, mib(b.peak));
  if (device_live > 0 || device_peak > 0) {
    s += fmt::format("{:<16} {:>14} {:>10.1f}  (not in the account: {:.1f} MiB: workspace, library scratch)\n",
                     "pool live", device_live, mib(device_live),
                     device_live >= b.total ? mib(device_live - b.total) : -mib(b.total - device_live));
    s += fmt::format("{:<16} {:>14} {:>10.1f}\n", "pool peak", device_peak, mib(device_peak));
  }
  return s;
}

std::string memory_json(const MemoryBreakdown& b, long long step, size_t device_live, size_t device_peak) {
  std::string s = fmt::format("{{\"split\":\"memory\",\"step\":{}", step);
  for (int i = 0; i < kMemoryCategories; ++i)
    s += fmt::format(",\"{}\":{}", memory_category_name(static_cast<MemoryCategory>(i)), b.live[static_cast<size_t>(i)]);
  s += fmt::format(",\"total\":{},\"peak\":{}", b.total, b.peak);
  if (device_live > 0 || device_peak > 0) s += fmt::format(",\"device_live\":{},\"device_peak\":{}", device_live, device_peak);
  return s + "}";
}

}  // namespace dp
