// defines: record_restart, what dptrain's launcher does at each restart (LocalLaunchOptions::
// on_restart, launch/local_launcher.h) with the run directory the failed launch left: where the
// restarted job resumes (the newest checkpoint), the watchdog's verdict and the last step done
// (the flight records, collectives/flight_analysis.h), which it then moves into
// flight/before-restart-<k>/ (the next failure's records stand alone), and one line
// {"split": "restart", ...} appended to metrics.jsonl.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/flight_analysis.h"
#include "launch/local_launcher.h"

namespace dp::launch {

// What the run directory says about a failed launch.
struct RestartFacts {
  int64_t resume_step = 0;  // the newest checkpoint's step (0: none, the job starts over)
  int64_t last_step = -1;   // the newest step done on some rank (-1: unknown, no flight record)
  std::string verdict;      // diagnose_flight's line ("": no flight record)
};

// Pure. The newest step some rank finished: its gradient all-reduces (bucket >= 0) on that rank
// all done (the update after them is local; the stop agreement that follows a step does not
// count). -1 when the records show none.
int64_t last_step_done(const std::vector<RankFlight>& records);

// Pure. The metrics.jsonl line: {"split": "restart", "restart", "max_restarts", "rank", "host",
// "exit_status", "signal" (0: it exited) and "signal_name" or "exit_code", "cause", "watchdog" (null:
// no verdict), "resume_step", "last_step" and "steps_lost" (null: unknown), "unix_time"}.
nlohmann::json restart_metrics_line(const RestartEvent& e, const RestartFacts& f, double unix_time);

// Pure. What the launcher's restart line adds: "the watchdog: <verdict>; resuming from step 16
// (4 steps lost)".
std::string restart_details(const RestartFacts& f);

// The facts of <run_dir>/<run_name> (its checkpoints/ and flight/ folders as they are).
RestartFacts read_restart_facts(const std::string& run_path);

// Pure. The restarts that metrics.jsonl text records (its {"split": "restart"} lines), one line
// each, for flightrec: "restart 1 of 2: rank 1 on h1 was killed by signal 9 (SIGKILL); resumed
// from step 16 (4 steps lost); the watchdog: <verdict>".
std::vector<std::string> restart_events(const std::string& metrics_text);

// Moves the failed launch's flight records into flight/before-restart-<restart>/; a file that
// cannot move is left (the next diagnosis may then mix it in; nothing else depends on it).
void set_flight_records_aside(const std::string& run_path, int restart);

// LocalLaunchOptions::on_restart for the run <run_dir>/<run_name>: reads the facts, moves the
// flight records aside, appends the metrics line; returns restart_details.
std::string record_restart(const std::string& run_dir, const std::string& run_name, const RestartEvent& e);

}  // namespace dp::launch
