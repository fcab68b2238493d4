#include "launch/telemetry/trace.h"

#include <nlohmann/json.hpp>

#include <chrono>

#include "base/error.h"

namespace dp::metrics {

double TraceRecorder::now_us() {
  using namespace std::chrono;
  // Anchor once: wall clock at the first call minus the steady clock then. Later readings come
  // from the steady clock, so an NTP step during the run cannot reorder or stretch events.
  static const double offset_us = duration<double, std::micro>(system_clock::now().time_since_epoch()).count() -
                                  duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
  return offset_us + duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

TraceRecorder::TraceRecorder(int rank) : rank_(rank), lanes_{"compute", "comm", "data"} {}

int TraceRecorder::lane(const std::string& name) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < lanes_.size(); ++i)
    if (lanes_[i] == name) return static_cast<int>(i);
  lanes_.push_back(name);
  return static_cast<int>(lanes_.size() - 1);
}

void TraceRecorder::complete(std::string name, std::string cat, int lane, double ts_us, double dur_us) {
  if (!enabled_) return;
  add({std::move(name), std::move(cat), lane, ts_us, dur_us});
}

void TraceRecorder::add(TraceEvent e) {
  std::lock_guard lock(mu_);
  DP_CHECK(e.lane >= 0 && e.lane < static_cast<int>(lanes_.size()), "trace lane {} not registered (have {})", e.lane,
           lanes_.size());
  events_.push_back(std::move(e));
}

TraceRecorder::Scope::Scope(TraceRecorder* t, std::string name, std::string cat, int lane)
    : t_(t->enabled() ? t : nullptr), name_(std::move(name)), cat_(std::move(cat)), lane_(lane),
      t0_(t_ ? now_us() : 0) {}

TraceRecorder::Scope::~Scope() {
  if (!t_) return;
  const double t1 = now_us();
  try {
    t_->complete(std::move(name_), std::move(cat_), lane_, t0_, t1 - t0_);
  } catch (...) {  // a destructor never throws; a bad lane was a programming error, already visible in tests
  }
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard lock(mu_);
  return events_;
}

std::string TraceRecorder::fragment() const {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank_}, {"tid", 0},
                 {"args", {{"name", fmt::format("rank {}", rank_)}}}});
  // Perfetto orders processes by this index: rank order.
  out.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank_}, {"tid", 0},
                 {"args", {{"sort_index", rank_}}}});
  for (size_t i = 0; i < lanes_.size(); ++i) {
    const int tid = static_cast<int>(i);
    out.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank_}, {"tid", tid}, {"args", {{"name", lanes_[i]}}}});
    out.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", rank_}, {"tid", tid},
                   {"args", {{"sort_index", tid}}}});
  }
  for (const auto& e : events_)
    out.push_back({{"ph", "X"}, {"name", e.name}, {"cat", e.cat}, {"pid", rank_}, {"tid", e.lane},
                   {"ts", e.ts_us}, {"dur", e.dur_us}});
  return out.dump();
}

std::string merge_trace_fragments(const std::vector<std::string>& fragments) {
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < fragments.size(); ++i) {
    nlohmann::json f = nlohmann::json::parse(fragments[i], nullptr, /*allow_exceptions=*/false);
    if (!f.is_array())
      throw DpError(fmt::format("trace fragment {} (of {}) is not a JSON array of trace events", i, fragments.size()));
    for (auto& e : f) all.push_back(std::move(e));
  }
  return nlohmann::json{{"traceEvents", all}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

}  // namespace dp::metrics
