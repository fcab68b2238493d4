// defines: FlightRecord (one collective as the flight recorder keeps it), FlightPeer (what a rank
// knew about a peer when it wrote its record), FlightContext, and FlightRecorder: the last N
// collectives of one communicator in a fixed ring buffer, always on (a few stores per collective
// under an uncontended mutex), written as <run>/flight/rank-<r>.json on a communication error or
// timeout, on abort() and on SIGUSR2 (launch/flight_signal.h). tools/flightrec reads every rank's
// file and says in one line who is stuck where (docs/multi-host.md).
//
// File format (JSON, one object; times in seconds relative to when the file was written, so that
// ranks on hosts with unsynchronised clocks compare durations, not timestamps):
//   {"format": "dptrain-flight", "version": 1, "rank": 4, "size": 8, "host": "h3",
//    "hosts": ["h1", ...] (every rank's host), "backend": "ring", "reason": "...",
//    "written_unix_s": 1.79e9, "in_flight": 5123 (0: none), "last_entered": 5123,
//    "last_completed": 5122,
//    "collectives": [{"seq", "op" ("allreduce", ...), "reduce" ("avg" or ""), "dtype", "count",
//                     "bytes", "root", "algorithm", "bucket" (-1: none), "step" (-1: none),
//                     "state" ("queued", "running", "done", "failed"), "issued_s", "started_s",
//                     "ended_s" (null until then)}, ...] oldest first,
//    "peers": [{"rank", "heard" (its data for the collective in flight had arrived), "awaited"
//               (this rank was waiting for its data), "queried", "answered" (to the last status
//               query), "entered", "completed" (what it answered), "closed" (its connection is
//               gone without a goodbye)}, ...] (every other rank)}
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "collectives/collective_tag.h"

namespace dp {

struct FlightRecord {
  using Clock = std::chrono::steady_clock;
  enum class State : uint8_t { Queued, Running, Done, Failed };
  uint64_t seq = 0;
  const char* op = "";         // static strings: "allreduce", "broadcast", ...
  const char* reduce = "";     // "sum", "avg", "max", "min" or ""
  const char* algorithm = "";  // "ring", "hierarchical", ...
  DType dtype = DType::F32;
  int64_t count = 0;
  int64_t bytes = 0;
  int32_t root = -1;
  CollectiveTag tag;
  Clock::time_point issued{}, started{}, ended{};  // zero until then
  State state = State::Queued;
};

struct FlightPeer {
  int rank = -1;
  bool heard = false, awaited = false;
  bool queried = false, answered = false, closed = false;
  uint64_t entered = 0, completed = 0;
};

// What a record file says besides the collectives.
struct FlightContext {
  int rank = 0, size = 1;
  std::vector<std::string> hosts;  // [rank]
  std::string backend;
  uint64_t in_flight = 0;
  std::vector<FlightPeer> peers;   // every other rank (may be empty)
};

class FlightRecorder {
 public:
  using Clock = FlightRecord::Clock;
  explicit FlightRecorder(size_t capacity);

  // The collective's life: issued (queued), started (its executor began), ended.
  void issued(const FlightRecord& r);
  void started(uint64_t seq);
  void ended(uint64_t seq, bool ok);

  // The records kept, oldest first.
  std::vector<FlightRecord> snapshot() const;
  uint64_t last_entered() const;
  uint64_t last_completed() const;

  // Where write() puts the file ("" = nowhere, the default).
  void set_path(const std::string& path);
  std::string path() const;
  // The file, atomically (a temporary, then rename); never throws. False when there is no path
  // or it could not be written (a warning is logged).
  bool write(const FlightContext& ctx, const std::string& reason) const;

  // Pure: the file's JSON text.
  static std::string to_json(const std::vector<FlightRecord>& records, const FlightContext& ctx,
                             const std::string& reason, Clock::time_point now, double now_unix_s,
                             uint64_t last_entered, uint64_t last_completed);

 private:
  FlightRecord* find(uint64_t seq);  // under mu_
  mutable std::mutex mu_;
  std::vector<FlightRecord> ring_;   // seq % capacity
  uint64_t last_entered_ = 0, last_completed_ = 0;
  std::string path_;
};

}  // namespace dp
