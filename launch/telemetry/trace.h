// defines: TraceRecorder, a Chrome trace ("Trace Event Format", opens in Perfetto and
// chrome://tracing) of one rank's step phases, and merge_trace_fragments, the one trace.json.
//
// Events are "complete" events (ph "X": name, cat, ts and dur in microseconds) with pid = rank
// and tid = a named lane ("compute", "comm", "data"); metadata events (ph "M") name each process
// "rank r" and each lane. Timestamps are wall-clock microseconds (a steady clock anchored to the
// system clock once per process), so ranks on different hosts line up as well as their clocks do.
//
// Use from the training loop (profile.trace_steps = "A-B", see step_range.h):
//
//   metrics::TraceRecorder trace(rank);                    // lanes "compute", "comm", "data" exist
//   { auto s = trace.scope("forward", "step", metrics::kLaneCompute); ... }   // RAII: records on exit
//   trace.complete("allreduce bucket 3", "comm", metrics::kLaneComm, t0_us, dur_us);  // any thread
//   std::string frag = trace.fragment();                   // this rank's events, a JSON array
//   // allgather the fragments to rank 0, then there:
//   run.write_text("trace.json", metrics::merge_trace_fragments(fragments));
//
// Appends are thread-safe (the communication thread records bucket all-reduces). set_enabled
// (false) makes every call a cheap no-op, so the loop can keep the calls outside the window.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dp::metrics {

// The lanes (Chrome "threads") every recorder has; lane() adds more.
inline constexpr int kLaneCompute = 0;
inline constexpr int kLaneComm = 1;
inline constexpr int kLaneData = 2;

struct TraceEvent {
  std::string name;  // "forward", "allreduce bucket 3"
  std::string cat;   // "step", "comm", "data"
  int lane = 0;      // tid
  double ts_us = 0;  // start, wall-clock microseconds
  double dur_us = 0;
};

class TraceRecorder {
 public:
  explicit TraceRecorder(int rank);

  // Microseconds since the Unix epoch, from a steady clock (monotonic within the process).
  static double now_us();

  // The lane id of `name` (registered on first use); lanes 0..2 are compute, comm, data.
  int lane(const std::string& name);

  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }

  // Records one complete event (thread-safe; nothing when disabled).
  void complete(std::string name, std::string cat, int lane, double ts_us, double dur_us);

  // Records an event measured earlier and read later (the per-layer profile's device lane),
  // whether or not the recorder is enabled now (thread-safe).
  void add(TraceEvent e);

  // Records [construction, destruction) as one event.
  class Scope {
   public:
    Scope(TraceRecorder* t, std::string name, std::string cat, int lane);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    TraceRecorder* t_;  // nullptr when the recorder was disabled at the start
    std::string name_, cat_;
    int lane_;
    double t0_;
  };
  Scope scope(std::string name, std::string cat, int lane) { return Scope(this, std::move(name), std::move(cat), lane); }

  // A copy of the events so far, in recording order.
  std::vector<TraceEvent> events() const;
  // This rank's metadata and events as a JSON array (text), e.g.
  // [{"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"rank 1"}}, ...,
  //  {"ph":"X","name":"forward","cat":"step","pid":1,"tid":0,"ts":...,"dur":...}]
  std::string fragment() const;

 private:
  int rank_;
  std::atomic<bool> enabled_{true};
  mutable std::mutex mu_;
  std::vector<std::string> lanes_;
  std::vector<TraceEvent> events_;
};

// One trace.json from every rank's fragment: {"traceEvents":[...all...],"displayTimeUnit":"ms"}.
// Throws DpError naming the fragment's index when one is not a JSON array.
std::string merge_trace_fragments(const std::vector<std::string>& fragments);

}  // namespace dp::metrics
