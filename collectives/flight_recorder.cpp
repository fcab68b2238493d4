#include "collectives/flight_recorder.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "runtime/log.h"

namespace dp {
namespace {

const char* state_name(FlightRecord::State s) {
  switch (s) {
    case FlightRecord::State::Queued: return "queued";
    case FlightRecord::State::Running: return "running";
    case FlightRecord::State::Done: return "done";
    case FlightRecord::State::Failed: return "failed";
  }
  return "?";
}

// Seconds of `t` relative to `now` (negative: before), or null when `t` is unset.
nlohmann::json rel(FlightRecord::Clock::time_point t, FlightRecord::Clock::time_point now) {
  if (t == FlightRecord::Clock::time_point{}) return nullptr;
  return std::chrono::duration<double>(t - now).count();
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity) : ring_(std::max<size_t>(capacity, 1)) {}

FlightRecord* FlightRecorder::find(uint64_t seq) {
  FlightRecord& r = ring_[seq % ring_.size()];
  return r.seq == seq ? &r : nullptr;
}

void FlightRecorder::issued(const FlightRecord& r) {
  std::lock_guard lock(mu_);
  FlightRecord& slot = ring_[r.seq % ring_.size()];
  slot = r;
  slot.issued = Clock::now();
  slot.state = FlightRecord::State::Queued;
}

void FlightRecorder::started(uint64_t seq) {
  std::lock_guard lock(mu_);
  if (FlightRecord* r = find(seq)) {
    r->started = Clock::now();
    r->state = FlightRecord::State::Running;
  }
  last_entered_ = std::max(last_entered_, seq);
}

void FlightRecorder::ended(uint64_t seq, bool ok) {
  std::lock_guard lock(mu_);
  if (FlightRecord* r = find(seq)) {
    r->ended = Clock::now();
    r->state = ok ? FlightRecord::State::Done : FlightRecord::State::Failed;
  }
  if (ok) last_completed_ = std::max(last_completed_, seq);
}

std::vector<FlightRecord> FlightRecorder::snapshot() const {
  std::lock_guard lock(mu_);
  std::vector<FlightRecord> out;
  for (const FlightRecord& r : ring_)
    if (r.seq > 0) out.push_back(r);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
  return out;
}

uint64_t FlightRecorder::last_entered() const {
  std::lock_guard lock(mu_);
  return last_entered_;
}

uint64_t FlightRecorder::last_completed() const {
  std::lock_guard lock(mu_);
  return last_completed_;
}

void FlightRecorder::set_path(const std::string& path) {
  std::lock_guard lock(mu_);
  path_ = path;
}

std::string FlightRecorder::path() const {
  std::lock_guard lock(mu_);
  return path_;
}

std::string FlightRecorder::to_json(const std::vector<FlightRecord>& records, const FlightContext& ctx,
                                    const std::string& reason, Clock::time_point now, double now_unix_s,
                                    uint64_t last_entered, uint64_t last_completed) {
  nlohmann::json j;
  j["format"] = "dptrain-flight";
  j["version"] = 1;
  j["rank"] = ctx.rank;
  j["size"] = ctx.size;
  j["host"] = ctx.rank < static_cast<int>(ctx.hosts.size()) ? ctx.hosts[ctx.rank] : "";
  j["hosts"] = ctx.hosts;
  j["backend"] = ctx.backend;
  j["reason"] = reason;
  j["written_unix_s"] = now_unix_s;
  j["in_flight"] = ctx.in_flight;
  j["last_entered"] = last_entered;
  j["last_completed"] = last_completed;
  nlohmann::json cs = nlohmann::json::array();
  for (const FlightRecord& r : records)
    cs.push_back({{"seq", r.seq}, {"op", r.op}, {"reduce", r.reduce}, {"dtype", dtype_name(r.dtype)},
                  {"count", r.count}, {"bytes", r.bytes}, {"root", r.root}, {"algorithm", r.algorithm},
                  {"bucket", r.tag.bucket}, {"step", r.tag.step}, {"state", state_name(r.state)},
                  {"issued_s", rel(r.issued, now)}, {"started_s", rel(r.started, now)},
                  {"ended_s", rel(r.ended, now)}});
  j["collectives"] = std::move(cs);
  nlohmann::json ps = nlohmann::json::array();
  for (const FlightPeer& p : ctx.peers)
    ps.push_back({{"rank", p.rank}, {"heard", p.heard}, {"awaited", p.awaited}, {"queried", p.queried},
                  {"answered", p.answered}, {"entered", p.entered}, {"completed", p.completed}, {"closed", p.closed}});
  j["peers"] = std::move(ps);
  return j.dump(1);
}

bool FlightRecorder::write(const FlightContext& ctx, const std::string& reason) const {
  const std::string where = path();
  if (where.empty()) return false;
  try {
    const auto now = Clock::now();
    const double unix_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string text =
        to_json(snapshot(), ctx, reason, now, unix_s, last_entered(), last_completed());
    namespace fs = std::filesystem;
    fs::create_directories(fs::path(where).parent_path());
    const std::string tmp = fmt::format("{}.tmp.{}", where, getpid());
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << text << '\n';
      f.flush();
      if (!f) throw DpError(fmt::format("cannot write {}", tmp));
    }
    fs::rename(tmp, where);
    log::get("coll")->warn("flight record written to {} ({})", where, reason.substr(0, 200));
    return true;
  } catch (const std::exception& e) {
    log::get("coll")->warn("could not write the flight record {}: {}", where, e.what());
    return false;
  }
}

}  // namespace dp
