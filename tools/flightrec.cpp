// flightrec: reads the flight records a job's ranks wrote (runs/<name>/flight/rank-<r>.json:
// collectives/flight_recorder.h) and prints one line saying who is stuck where, e.g.
//   ranks 4-5 on host h3 never entered all-reduce #5123 (bucket 7, step 812); all others are waiting in it
//
//   flightrec RUN_DIR [--ranks]     RUN_DIR: runs/<name>, or its flight/ folder
//     --ranks   also one line per rank: its host, the collective it was in, why it wrote the record
//
// Exit status 0 when it could read the records, 2 on a usage error or unreadable records.
#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "collectives/flight_analysis.h"

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
