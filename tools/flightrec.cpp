// flightrec: reads the flight records a job's ranks wrote (runs/<name>/flight/rank-<r>.json:
// collectives/flight_recorder.h) and prints one line saying who is stuck where, e.g.
//   ranks 4-5 on host h3 never entered all-reduce #5123 (bucket 7, step 812); all others are waiting in it
//
//   flightrec RUN_DIR [--ranks]     RUN_DIR: runs/<name>, or its flight/ folder
//     --ranks   also one line per rank: its host, the collective it was in, why it wrote the record
//
// A run restarted by dptrain --nproc --max-restarts: first one line per restart (from the run's
// metrics.jsonl; each restart's records are in flight/before-restart-<k>/), then the diagnosis of
// the records written since, if any.
//
// Exit status 0 when it could read the records, 2 on a usage error or unreadable records.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "collectives/flight_analysis.h"
#include "launch/restart_record.h"

namespace {

// The restarts the run directory's metrics.jsonl records, printed; how many.
size_t print_restarts(const std::string& dir) {
  std::ifstream in(dir + "/metrics.jsonl");
  if (!in) return 0;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::vector<std::string> events = dp::launch::restart_events(ss.str());
  for (const auto& e : events) std::printf("%s\n", e.c_str());
  return events.size();
}

bool has_flight_records(const std::string& dir) {
  std::error_code ec;
  for (const std::string& d : {dir + "/flight", dir})
    for (const auto& e : std::filesystem::directory_iterator(d, ec))
      if (e.path().filename().string().rfind("rank-", 0) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  bool ranks = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--ranks") == 0) ranks = true;
    else if (dir.empty() && argv[i][0] != '-') dir = argv[i];
    else dir.clear(), i = argc;
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: flightrec RUN_DIR [--ranks]   (RUN_DIR: runs/<name> or its flight/ folder)\n");
    return 2;
  }
  try {
    const size_t restarts = print_restarts(dir);
    if (restarts > 0 && !has_flight_records(dir)) {
      std::printf("no flight record since restart %zu (each restart's records: flight/before-restart-<k>/)\n", restarts);
      return 0;
    }
    const std::vector<dp::RankFlight> recs = dp::read_flight_dir(dir);
    std::printf("%s\n", dp::diagnose_flight(recs).c_str());
    if (ranks)
      for (const auto& f : recs)
        std::printf("rank %d on %s: entered #%llu, completed #%llu; %s\n", f.rank, f.host.c_str(),
                    static_cast<unsigned long long>(f.last_entered), static_cast<unsigned long long>(f.last_completed),
                    f.reason.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flightrec: error: %s\n", e.what());
    return 2;
  }
}
