#include "launch/telemetry/layer_profile.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "runtime/graph.h"

namespace dp::metrics {
namespace {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Loss: return "loss";
    case Phase::Optimizer: return "optimizer";
    case Phase::CommWait: return "comm wait";
    case Phase::DataWait: return "data wait";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Unattributed: break;
  }
  return "unattributed";
}

// The row a node's time goes to: itself, or the host a folded node's work is part of (followed to the end).
int row_node(const std::vector<NodeInfo>& nodes, int node) {
  for (size_t hops = 0; nodes[static_cast<size_t>(node)].folded_into >= 0 && hops < nodes.size(); ++hops)
    node = nodes[static_cast<size_t>(node)].folded_into;
  return node;
}

}  // namespace

std::vector<NodeInfo> node_infos(const Graph& g) {
  std::vector<NodeInfo> out;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Layer& l = *g.nodes()[i].layer;
    out.push_back({l.name(), l.type(), g.nodes()[i].out_shape, g.folded_into(static_cast<int>(i))});
  }
  return out;
}

size_t step_mark_bound(size_t nodes, int64_t micro_batches) {
  return 2 + static_cast<size_t>(std::max<int64_t>(micro_batches, 1)) * (4 + 4 * nodes) + 4;
}

LayerProfiler::LayerProfiler(StepRange window, std::unique_ptr<MarkSource> marks, size_t marks_per_step)
    : window_(window), marks_(std::move(marks)), marks_per_step_(marks_per_step) {
  DP_CHECK(window_.empty() || marks_, "a layer profile window without a mark source");
}

void LayerProfiler::mark(Kind kind, Phase phase, int node) {
  marks_->record(log_.size());
  log_.push_back({step_, kind, phase, node});
}

void LayerProfiler::begin_step(int64_t step) {
  in_step_ = false;
  if (finished_ || window_.empty() || !window_.contains(step)) return;
  if (!opened_) {
    // Outside the window still: the GPU makes its events and drains the stream here.
    marks_->open(marks_per_step_ * static_cast<size_t>(window_.last - step + 1));
    opened_ = true;
    first_ = step;
  }
  step_ = step;
  in_step_ = true;
  mark(Kind::Open, Phase::Unattributed, -1);
}

void LayerProfiler::begin(Phase phase, int node) {
  if (in_step_) mark(Kind::Switch, phase, node);
}

bool LayerProfiler::end_step() {
  if (!in_step_) return false;
  mark(Kind::Close, Phase::Unattributed, -1);
  in_step_ = false;
  last_ = step_;
  ++steps_;
  return step_ >= window_.last;
}

LayerProfile LayerProfiler::finish(const std::vector<NodeInfo>& nodes, const std::string& device,
                                   const std::string& precision, const std::string& dtype) {
  DP_CHECK(pending(), "layer profile finished with no step recorded (or twice)");
  finished_ = true;
  in_step_ = false;
  const std::vector<double> t = marks_->times_ms(log_.size());
  LayerProfile p;
  p.first = first_, p.last = last_, p.steps = steps_;
  p.device = device, p.precision = precision, p.dtype = dtype;
  p.origin_us = marks_->origin_us();
  std::vector<double> fwd(nodes.size(), 0), bwd(nodes.size(), 0);
  double step_sum = 0, opened_at = 0, phase_sum[7] = {};
  for (size_t i = 0; i < log_.size(); ++i) {
    const Mark& m = log_[i];
    if (m.kind == Kind::Open) opened_at = t[i];
    if (m.kind == Kind::Close) {
      step_sum += t[i] - opened_at;
      continue;
    }
    DP_CHECK(i + 1 < log_.size(), "layer profile: step {} has no closing mark", m.step);
    const double d = t[i + 1] - t[i];
    phase_sum[static_cast<int>(m.phase)] += d;
    if (m.phase == Phase::Unattributed) continue;
    std::string name = phase_name(m.phase);
    if (m.phase == Phase::Forward || m.phase == Phase::Backward) {
      DP_CHECK(m.node >= 0 && static_cast<size_t>(m.node) < nodes.size(), "layer profile: node {} of {}", m.node,
               nodes.size());
      (m.phase == Phase::Forward ? fwd : bwd)[static_cast<size_t>(m.node)] += d;
      name = nodes[static_cast<size_t>(m.node)].name;
    }
    p.spans.push_back({m.step, m.phase, m.node, std::move(name), t[i], d});
  }
  const double n = static_cast<double>(steps_);
  // Rows: every node but the folded ones (ReLUs, residual adds), which are named in their host's row.
  std::vector<int> row_of(nodes.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].folded_into >= 0) continue;
    row_of[i] = static_cast<int>(p.layers.size());
    p.layers.push_back({nodes[i].name, nodes[i].type, nodes[i].out_shape, {}, 0, 0});
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    LayerRow& r = p.layers[static_cast<size_t>(row_of[static_cast<size_t>(row_node(nodes, static_cast<int>(i)))])];
    if (nodes[i].folded_into >= 0) r.fused.push_back(nodes[i].name);
    r.fwd_ms += fwd[i] / n, r.bwd_ms += bwd[i] / n;
  }
  std::stable_sort(p.layers.begin(), p.layers.end(), [](const LayerRow& a, const LayerRow& b) {
    const double ta = a.fwd_ms + a.bwd_ms, tb = b.fwd_ms + b.bwd_ms;
    return ta != tb ? ta > tb : a.name < b.name;
  });
  p.step_ms = step_sum / n;
  p.loss_ms = phase_sum[static_cast<int>(Phase::Loss)] / n;
  p.optimizer_ms = phase_sum[static_cast<int>(Phase::Optimizer)] / n;
  p.comm_wait_ms = phase_sum[static_cast<int>(Phase::CommWait)] / n;
  p.data_wait_ms = phase_sum[static_cast<int>(Phase::DataWait)] / n;
  // The identity, exactly: the step minus everything attributed (what the unattributed phases
  // sum to, up to rounding).
  double attributed = p.loss_ms + p.optimizer_ms + p.comm_wait_ms + p.data_wait_ms;
  for (const LayerRow& r : p.layers) attributed += r.fwd_ms + r.bwd_ms;
  p.unattributed_ms = p.step_ms - attributed;
  return p;
}

std::string layer_table(const LayerProfile& p) {
  auto share = [&](double ms) { return p.step_ms > 0 ? 100.0 * ms / p.step_ms : 0.0; };
  std::vector<std::string> names;
  size_t w_name = 5, w_type = 4, w_shape = 9;
  for (const LayerRow& r : p.layers) {
    std::string n = r.name;
    for (const auto& f : r.fused) n += " +" + f;
    w_name = std::max(w_name, n.size());
    w_type = std::max(w_type, r.type.size());
    w_shape = std::max(w_shape, shape_str(r.out_shape).size());
    names.push_back(std::move(n));
  }
  std::string s = fmt::format(
      "layer profile of steps {}-{} ({} step{}) on {}, {}: {:.3f} ms per step (means per step, slowest layers first)\n",
      p.first, p.last, p.steps, p.steps == 1 ? "" : "s", p.device, p.precision, p.step_ms);
  s += fmt::format("  {:>4}  {:<{}}  {:<{}}  {:<{}}  {:<5}  {:>9}  {:>9}  {:>6}\n", "#", "layer", w_name, "type", w_type,
                   "out shape", w_shape, "dtype", "fwd ms", "bwd ms", "share");
  double fwd = 0, bwd = 0;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const LayerRow& r = p.layers[i];
    fwd += r.fwd_ms, bwd += r.bwd_ms;
    s += fmt::format("  {:>4}  {:<{}}  {:<{}}  {:<{}}  {:<5}  {:>9.3f}  {:>9.3f}  {:>5.1f}%\n", i + 1, names[i], w_name,
                     r.type, w_type, shape_str(r.out_shape), w_shape, p.dtype, r.fwd_ms, r.bwd_ms,
                     share(r.fwd_ms + r.bwd_ms));
  }
  const std::pair<const char*, double> acct[] = {
      {"layers, forward", fwd},           {"layers, backward", bwd},       {"loss", p.loss_ms},
      {"optimizer", p.optimizer_ms},      {"comm wait", p.comm_wait_ms},   {"data wait", p.data_wait_ms},
      {"unattributed", p.unattributed_ms}, {"step", p.step_ms}};
  for (const auto& [what, ms] : acct) s += fmt::format("  {:<20} {:>9.3f} ms  {:>5.1f}%\n", what, ms, share(ms));
  s.pop_back();
  return s;
}

std::string layers_json(const LayerProfile& p) {
  using Json = nlohmann::ordered_json;  // keys in the documented order
  Json layers = Json::array();
  for (const LayerRow& r : p.layers)
    layers.push_back({{"name", r.name}, {"type", r.type}, {"out_shape", r.out_shape}, {"fwd_ms", r.fwd_ms},
                      {"bwd_ms", r.bwd_ms}, {"fused", r.fused}});
  Json j;
  j["steps"] = {p.first, p.last};
  j["device"] = p.device;
  j["precision"] = p.precision;
  j["step_ms"] = p.step_ms;
  j["layers"] = std::move(layers);
  j["other"] = {{"loss_ms", p.loss_ms}, {"optimizer_ms", p.optimizer_ms}, {"comm_wait_ms", p.comm_wait_ms},
                {"data_wait_ms", p.data_wait_ms}, {"unattributed_ms", p.unattributed_ms}};
  return j.dump() + "\n";
}

std::vector<TraceEvent> layer_trace_events(const LayerProfile& p, StepRange trace_window, int lane) {
  std::vector<TraceEvent> out;
  for (const ProfileSpan& s : p.spans) {
    if (!trace_window.contains(s.step)) continue;
    const bool layer = s.phase == Phase::Forward || s.phase == Phase::Backward;
    out.push_back({s.name, layer ? phase_name(s.phase) : "step", lane, p.origin_us + 1e3 * s.begin_ms, 1e3 * s.dur_ms});
  }
  return out;
}

}  // namespace dp::metrics
